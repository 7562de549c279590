#!/usr/bin/env node
// A private UCB in another language, served to dpaudit over its process protocol
// (dpaudit.process/1: one JSON object per line on stdin, one answer per line on stdout; the
// reference is docs/outside-code.md). Audit it with
//
//   dpaudit check policy "node examples/process_ucb.js" --adapter process --claim pure:eps=1
//   dpaudit check policy "node examples/process_ucb.js --leaky" --adapter process --claim pure:eps=1
//
// The algorithm is AdaP-UCB (Azize & Basu 2022, "When Privacy Meets Partial Information: A Refined
// Analysis of Differentially Private Bandits"), the same as examples/per_run_ucb.py's PrivateUCB:
//
// * play each arm once (arms 0, 1, ..., K-1);
// * then episodes: choose the arm with the largest index and play it for as many rounds as it has
//   been played so far (its pull count doubles); when the episode ends, release the episode's reward
//   sum plus Laplace(1/epsilon) noise; the arm's statistic is that noisy sum over the episode's
//   length (older episodes are forgotten);
// * index of arm a with last episode length n at the 1-based round t where the next episode starts:
//   noisy_mean_a + sqrt(beta log t / (2 n)) + beta log t / (epsilon n); ties go to the lowest arm.
//
// Why it is epsilon-DP (Table DP, rewards in [0, 1], claim pure:eps=<epsilon>): one user's row
// changes at most one observed reward, which enters exactly one episode sum (L1 sensitivity 1),
// released once with Laplace(1/epsilon); the other releases read other rounds, and the actions are
// post-processing of the releases (parallel composition over disjoint episodes).
//
// --leaky is a positive control: the noise scale meant for the mean, 1/(epsilon n), is added to the
// sum, so a reward in an episode of length n is protected at epsilon * n only; the claim is false.
//
// One process serves every run of a batch: each run has its own generator seeded from (seed, run),
// so the same seed gives the same arms whichever way dpaudit sends the messages (batched or per run).
"use strict";

const readline = require("readline");

const PROTOCOL = "dpaudit.process/1";
const LEAKY = process.argv.includes("--leaky");

// ---- randomness: one small counter-based generator per run (splitmix64 on BigInt would be slow;
// mulberry32 on a 32-bit state mixed from the seed and the run is enough for an example) ----------
function mix32(a, b) {
  let h = (Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x7f4a7c15, 0xc2b2ae35)) >>> 0;
  h ^= h >>> 16; h = Math.imul(h, 0x7feb352d) >>> 0; h ^= h >>> 15; h = Math.imul(h, 0x846ca68b) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}
function uniform(state, i) {  // mulberry32 step of run i; a number in (0, 1)
  state[i] = (state[i] + 0x6d2b79f5) >>> 0;
  let z = state[i];
  z = Math.imul(z ^ (z >>> 15), z | 1);
  z ^= z + Math.imul(z ^ (z >>> 7), z | 61);
  return ((((z ^ (z >>> 14)) >>> 0) + 0.5) / 4294967296);
}
function laplace(state, i, scale) {
  const u = uniform(state, i) - 0.5;
  return -scale * Math.sign(u) * Math.log(1 - 2 * Math.abs(u));
}

// ---- the policy, batched over runs: typed arrays, one entry per run --------------------------------
class Runs {
  constructor(n, K, epsilon, beta, seed) {
    this.n = n; this.K = K; this.epsilon = epsilon; this.beta = beta;
    this.counts = new Float64Array(n * K);     // pulls of each arm, completed episodes only
    this.lastLen = new Float64Array(n * K).fill(1);
    this.noisyMean = new Float64Array(n * K);
    this.t = new Float64Array(n);              // rounds played so far
    this.arm = new Int32Array(n);              // arm of the current episode
    this.epLen = new Float64Array(n).fill(1);
    this.left = new Float64Array(n).fill(1);
    this.epSum = new Float64Array(n);
    this.rng = new Uint32Array(n);
    for (let i = 0; i < n; i++) this.rng[i] = mix32(seed >>> 0, i);
  }
  noiseScale(n) { return LEAKY ? 1 / (this.epsilon * n) : 1 / this.epsilon; }
  update(i, reward) {
    const K = this.K;
    this.epSum[i] += reward; this.t[i] += 1; this.left[i] -= 1;
    if (this.left[i] > 0) return;
    const a = this.arm[i], n = this.epLen[i];
    this.noisyMean[i * K + a] = (this.epSum[i] + laplace(this.rng, i, this.noiseScale(n))) / n;
    this.lastLen[i * K + a] = n;
    this.counts[i * K + a] += n;
    this.epSum[i] = 0;
    if (this.t[i] < K) { this.arm[i] = this.t[i]; this.epLen[i] = this.left[i] = 1; return; }
    const logT = Math.log(this.t[i] + 1);
    let best = 0, bestIndex = -Infinity;
    for (let b = 0; b < K; b++) {
      const m = this.lastLen[i * K + b];
      const index = this.noisyMean[i * K + b] + Math.sqrt(this.beta * logT / (2 * m)) + this.beta * logT / (this.epsilon * m);
      if (index > bestIndex) { best = b; bestIndex = index; }
    }
    this.arm[i] = best;
    this.epLen[i] = this.left[i] = this.counts[i * K + best];
  }
}

// ---- the protocol ------------------------------------------------------------------------------------
let params = { n_arms: 2, epsilon: 1.0, beta: 4.0 };
let runs = null;

function configure(p) {
  const out = { ...params };
  for (const [k, v] of Object.entries(p || {})) {
    if (!(k in params)) throw new Error(`unknown parameter ${k}; the parameters are n_arms, epsilon, beta`);
    out[k] = Number(v);
  }
  if (!(Number.isInteger(out.n_arms) && out.n_arms >= 2) || !(out.epsilon > 0) || !(out.beta > 0)) {
    throw new Error("need n_arms >= 2 (an integer), epsilon > 0 and beta > 0");
  }
  params = out;
}

function checkReward(r) {
  if (!(typeof r === "number" && r >= 0 && r <= 1)) throw new Error(`reward ${r} outside [0, 1]`);
  return r;
}

function handle(msg) {
  switch (msg.op) {
    case "hello":
      configure(msg.params);
      return { protocol: PROTOCOL, name: LEAKY ? "LeakyUCB (node)" : "PrivateUCB (node)", n_arms: params.n_arms,
               batch: true, reward_range: [0, 1] };
    case "claim":
      return { claim: `pure:eps=${params.epsilon}` };
    case "reset":
      configure(msg.params);
      runs = new Runs(msg.runs, params.n_arms, params.epsilon, params.beta, msg.seed);
      return { ok: true };
    case "act":
      if (msg.run !== undefined) return { arm: runs.arm[msg.run] };
      return { arms: Array.from(runs.arm) };
    case "observe":
      if (msg.run !== undefined) { runs.update(msg.run, checkReward(msg.reward)); return { ok: true }; }
      for (let i = 0; i < runs.n; i++) runs.update(i, checkReward(msg.rewards[i]));
      return { ok: true };
    case "bye":
      return { ok: true };
    default:
      throw new Error(`unknown op ${msg.op}`);
  }
}

const rl = readline.createInterface({ input: process.stdin, terminal: false });
const out = [];
let scheduled = false;
function flush() { scheduled = false; if (out.length) { process.stdout.write(out.join("")); out.length = 0; } }
rl.on("line", (line) => {
  let reply;
  try {
    reply = handle(JSON.parse(line));
  } catch (e) {
    reply = { error: String(e && e.message ? e.message : e) };
  }
  out.push(JSON.stringify(reply) + "\n");
  if (!scheduled) { scheduled = true; setImmediate(flush); }  // answers to a burst of lines leave together
});
rl.on("close", () => { flush(); process.exit(0); });
