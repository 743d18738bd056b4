// ort_predict.js: the ONNX Runtime side of `bertrain bench predict`: the exported model on the same token ids as
// bertrain's prediction path, in ONNX Runtime's Node.js package (onnxruntime-node), all graph optimizations on.
//   node ort_predict.js MANIFEST.json
// MANIFEST: {"runtime": dir of onnxruntime-node, "model": "m.onnx", "threads": N, "batch_size": B,
//            "latency_requests": R, "lengths": [...], "tokens_file": f, "out": "result.json"}
// tokens_file: for each example in file order, its input_ids then its token_type_ids, int32 little-endian, `length`
// values each (real tokens only). Throughput: batches of B in file order, and length-sorted (longest first, stable),
// each padded to its longest example; one untimed pass over the same batches first. Latency: R requests of batch 1
// (examples in file order, cycling), unpadded, after the same R untimed. Wall time, and the process's CPU time (user + system)
// beside it, which a busy machine disturbs less. Writes {"throughput": {...}, "latency": {...}} to `out`.
'use strict';
const fs = require('fs');

function percentile(sorted, p) {
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[i];
}

async function main() {
  const m = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const ort = require(m.runtime);
  const session = await ort.InferenceSession.create(m.model, {
    intraOpNumThreads: m.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const buf = fs.readFileSync(m.tokens_file);
  const all = new Int32Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
  const n = m.lengths.length;
  const offsets = [];
  let at = 0;
  for (const len of m.lengths) {
    offsets.push(at);
    at += 2 * len;
  }
  if (at !== all.length) throw new Error(`${m.tokens_file}: ${all.length} values, expected ${at}`);

  function feeds(rows) {
    const b = rows.length;
    const t = Math.max(...rows.map((r) => m.lengths[r]));
    const ids = new BigInt64Array(b * t), mask = new BigInt64Array(b * t), types = new BigInt64Array(b * t);
    rows.forEach((r, i) => {
      const len = m.lengths[r], o = offsets[r];
      for (let j = 0; j < len; ++j) {
        ids[i * t + j] = BigInt(all[o + j]);
        types[i * t + j] = BigInt(all[o + len + j]);
        mask[i * t + j] = 1n;
      }
    });
    return {
      feeds: {
        input_ids: new ort.Tensor('int64', ids, [b, t]),
        attention_mask: new ort.Tensor('int64', mask, [b, t]),
        token_type_ids: new ort.Tensor('int64', types, [b, t]),
      },
      positions: b * t,
    };
  }

  async function throughput(order) {
    const batches = [];
    for (let k = 0; k < n; k += m.batch_size) batches.push(feeds(order.slice(k, k + m.batch_size)));
    for (const b of batches) await session.run(b.feeds);  // warm-up: one untimed pass, every shape met once
    let positions = 0;
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    for (const b of batches) {
      await session.run(b.feeds);
      positions += b.positions;
    }
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const c = process.cpuUsage(c0);
    const real = m.lengths.reduce((a, b) => a + b, 0);
    return { seconds, cpu_seconds: (c.user + c.system) / 1e6, sequences: n, real_tokens: real,
             padded_positions: positions, batches: batches.length };
  }

  const fileOrder = [...Array(n).keys()];
  const sorted = [...fileOrder].sort((a, b) => m.lengths[b] - m.lengths[a] || a - b);
  const result = { throughput: {}, latency: {} };
  result.throughput.file_order = await throughput(fileOrder);
  result.throughput.length_sorted = await throughput(sorted);

  const times = [], cpu = [];
  // The R requests twice: the first time untimed (warm-up, every length met once), then timed.
  const R = m.latency_requests;
  for (let k = 0; k < 2 * R; ++k) {
    const f = feeds([(k % R) % n]).feeds;
    const t0 = process.hrtime.bigint(), c0 = process.cpuUsage();
    await session.run(f);
    const c = process.cpuUsage(c0);
    if (k >= R) {
      times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      cpu.push((c.user + c.system) / 1e3);
    }
  }
  const s = [...times].sort((a, b) => a - b), sc = [...cpu].sort((a, b) => a - b);
  result.latency = {
    requests: times.length,
    p50_ms: percentile(s, 0.5),
    p99_ms: percentile(s, 0.99),
    mean_ms: times.reduce((a, b) => a + b, 0) / times.length,
    cpu_p50_ms: percentile(sc, 0.5),
    cpu_p99_ms: percentile(sc, 0.99),
  };
  fs.writeFileSync(m.out, JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_predict.js: ${e.message || e}`);
  process.exit(1);
});
