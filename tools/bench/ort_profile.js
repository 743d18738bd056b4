// ort_profile.js: where the time of one batch-1 request goes in ONNX Runtime (onnxruntime-node), the counterpart of
// `bertrain bench request`. One request of T tokens (ids 1000.., second half segment B, no padding), the same thread
// settings as tools/bench/ort_predict.js (intra-op threads N, sequential, all graph optimizations):
//   1. the median wall time of R requests in a session without profiling (after max(10, R/10) untimed ones);
//   2. a second session with ONNX Runtime's profiler on: per operator type, the kernels' mean time per request,
//      their count, and the share of the profiled request's mean time. The profiler adds a fixed cost per kernel, so the profiled
//      request is slower than (1); the shares are what it says.
//   node tools/bench/ort_profile.js MODEL.onnx [--tokens T] [--requests R] [--threads N] [--runtime DIR]
// Prints a table; writes nothing but ONNX Runtime's own profile JSON into a temporary directory it removes.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');

function usage(msg) {
  process.stderr.write(`ort_profile.js: ${msg}\nusage: node ort_profile.js MODEL.onnx [--tokens T] [--requests R] ` +
                       '[--threads N] [--runtime DIR]\n');
  process.exit(2);
}

function parseArgs(argv) {
  const a = { tokens: 51, requests: 2000, threads: 2,
              runtime: path.join(__dirname, '..', '..', '.deps', 'onnxruntime', 'node_modules', 'onnxruntime-node') };
  const rest = [];
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i];
    if (k === '--help' || k === '-h') {
      process.stdout.write('usage: node ort_profile.js MODEL.onnx [--tokens T] [--requests R] [--threads N] ' +
                           '[--runtime DIR]\n');
      process.exit(0);
    }
    if (k.startsWith('--')) {
      const name = k.slice(2);
      if (!(name in a)) usage(`unknown flag ${k}`);
      if (i + 1 >= argv.length) usage(`${k} needs a value`);
      const v = argv[++i];
      if (name === 'runtime') a.runtime = v;
      else {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) usage(`${k} must be a positive integer, got '${v}'`);
        a[name] = n;
      }
    } else {
      rest.push(k);
    }
  }
  if (rest.length !== 1) usage('one MODEL.onnx expected');
  a.model = rest[0];
  if (!fs.existsSync(a.model)) usage(`${a.model} does not exist`);
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = require(a.runtime);
  const T = a.tokens;
  const ids = new BigInt64Array(T), mask = new BigInt64Array(T), types = new BigInt64Array(T);
  for (let j = 0; j < T; ++j) {
    ids[j] = BigInt(1000 + j);
    mask[j] = 1n;
    types[j] = j >= Math.floor(T / 2) ? 1n : 0n;
  }
  const feeds = { input_ids: new ort.Tensor('int64', ids, [1, T]), attention_mask: new ort.Tensor('int64', mask, [1, T]),
                  token_type_ids: new ort.Tensor('int64', types, [1, T]) };
  const options = { intraOpNumThreads: a.threads, interOpNumThreads: 1, executionMode: 'sequential',
                    graphOptimizationLevel: 'all' };
  const warm = Math.max(10, Math.floor(a.requests / 10));

  const plain = await ort.InferenceSession.create(a.model, options);
  for (let i = 0; i < warm; ++i) await plain.run(feeds);
  const ms = [];
  for (let i = 0; i < a.requests; ++i) {
    const t0 = process.hrtime.bigint();
    await plain.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ms.sort((x, y) => x - y);
  const p50 = ms[Math.floor(a.requests / 2)];
  await plain.release();

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ort-profile-'));
  try {
    const prof = await ort.InferenceSession.create(a.model, { ...options, enableProfiling: true,
                                                              profileFilePrefix: path.join(dir, 'profile') });
    for (let i = 0; i < warm; ++i) await prof.run(feeds);
    for (let i = 0; i < a.requests; ++i) await prof.run(feeds);
    if (prof.endProfiling) prof.endProfiling();
    await prof.release();
    const files = fs.readdirSync(dir).filter((f) => f.endsWith('.json'));
    if (files.length !== 1) throw new Error(`expected one profile file in ${dir}, found ${files.length}`);
    const events = JSON.parse(fs.readFileSync(path.join(dir, files[0]), 'utf8'));
    // The timed requests are the last R model runs; their kernels are the Node events inside them.
    const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run').slice(-a.requests);
    if (runs.length !== a.requests) throw new Error(`profile holds ${runs.length} runs, expected ${a.requests}`);
    const start = runs[0].ts;
    const kernels = events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time') && e.ts >= start);
    const byType = new Map();
    for (const e of kernels) {
      const op = e.args && e.args.op_name ? e.args.op_name : e.name;
      const r = byType.get(op) || { us: 0, n: 0 };
      r.us += e.dur;
      r.n += 1;
      byType.set(op, r);
    }
    // Means per request (the kernels' sum is a mean, so the request's is too); the p50 is printed beside it.
    const runP50 = runs.map((e) => e.dur).sort((x, y) => x - y)[Math.floor(a.requests / 2)];
    const runUs = runs.reduce((s, e) => s + e.dur, 0) / a.requests;
    const total = [...byType.values()].reduce((s, r) => s + r.us, 0) / a.requests;
    console.log(`ort_profile: ${a.model}, one request of ${T} tokens, ${a.threads} threads, onnxruntime-node ` +
                `${require(path.join(a.runtime, 'package.json')).version}`);
    console.log(`whole request without the profiler: p50 ${(1e3 * p50).toFixed(1)} us over ${a.requests} requests`);
    console.log(`with the profiler: request mean ${runUs.toFixed(1)} us (p50 ${runP50.toFixed(1)} us), kernels ` +
                `${total.toFixed(1)} us per request (mean); shares of the mean request`);
    console.log(`${'operator'.padEnd(24)} ${'us/request'.padStart(11)} ${'kernels'.padStart(8)} ${'share'.padStart(7)}`);
    for (const [op, r] of [...byType.entries()].sort((x, y) => y[1].us - x[1].us)) {
      console.log(`${op.padEnd(24)} ${(r.us / a.requests).toFixed(1).padStart(11)} ` +
                  `${(r.n / a.requests).toFixed(0).padStart(8)} ${(100 * r.us / a.requests / runUs).toFixed(1).padStart(6)}%`);
    }
    console.log(`${'between the kernels'.padEnd(24)} ${(runUs - total).toFixed(1).padStart(11)} ${''.padStart(8)} ` +
                `${(100 * (runUs - total) / runUs).toFixed(1).padStart(6)}%`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`ort_profile.js: ${e.message}\n`);
  process.exit(1);
});
