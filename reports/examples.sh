#!/bin/sh
# Regenerates the example reports of this folder (each .md with its self-contained .html).
# Run from the repository root: sh reports/examples.sh
set -e
dpaudit check policy adac-ucb --param n_arms=5 --param rho=0.1 --horizon 48 --seed 0 --horizons 12,24,48,96,192 --report reports/example-adac-ucb.md || true
dpaudit check policy mutant-no-forgetting --param n_arms=5 --horizon 48 --seed 0 --horizons 12,24,48,96,192 --report reports/example-mutant-no-forgetting.md || true
dpaudit check policy mutant-se-shared-noise --seed 0 --report reports/example-mutant-se-shared-noise.md || true
dpaudit check policy ldp-ucb-rr --protocol local --horizon 48 --seed 0 --report reports/example-local-ldp-ucb-rr.md || true
dpaudit check policy ldp-bco-fkm --protocol local --horizon 48 --seed 0 --report reports/example-local-ldp-bco-fkm.md || true
dpaudit check policy jdp-glm --protocol joint --seed 0 --report reports/example-joint-jdp-glm.md || true
dpaudit check policy shuffle-glm --protocol shuffle --seed 0 --report reports/example-shuffle-glm.md || true
# code written the way other authors write it, audited unchanged through the per-run adapter
dpaudit check policy tests/thirdparty/elimination.py:SharedNoiseBlockElimination --adapter per-run --param n_arms=2 --claim pure:eps=1 --seed 0 --report reports/example-thirdparty-shared-noise-elimination.md || true
dpaudit check policy tests/thirdparty/ucb_counter.py:EpisodicLaplaceUCB --adapter per-run --param n_arms=2 --claim pure:eps=1 --seed 0 --report reports/example-thirdparty-episodic-ucb.md || true
