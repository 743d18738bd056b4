// ort_run.js: runs an ONNX model in ONNX Runtime (the npm package onnxruntime-node) on batches of token ids and
// writes every output as raw little-endian float32, for tests/io/onnx_export_test.cpp.
//   node ort_run.js MANIFEST.json
// MANIFEST: {"runtime": "<dir of onnxruntime-node>", "model": "m.onnx", "threads": 1, "out_dir": "dir",
//            "batches": [{"batch": B, "length": T, "file": "b0.bin"}, ...]}
// Each batch file holds input_ids, attention_mask and token_type_ids, (B, T) int64 little-endian each, one after
// the other. Writes out_dir/b<i>_<output>.bin per batch and output, and out_dir/result.json:
// {"outputs": [[{"name": n, "dims": [...]}, ...] per batch], "input_names": [...], "output_names": [...]}.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  const ort = require(manifest.runtime);
  const session = await ort.InferenceSession.create(manifest.model, {
    intraOpNumThreads: manifest.threads || 1,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const result = { outputs: [], input_names: session.inputNames, output_names: session.outputNames };
  for (let i = 0; i < manifest.batches.length; ++i) {
    const b = manifest.batches[i];
    const n = b.batch * b.length;
    const buf = fs.readFileSync(b.file);
    if (buf.length !== 3 * n * 8) throw new Error(`${b.file}: ${buf.length} bytes, expected ${3 * n * 8}`);
    const all = new BigInt64Array(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.length));
    const feeds = {};
    ['input_ids', 'attention_mask', 'token_type_ids'].forEach((name, k) => {
      feeds[name] = new ort.Tensor('int64', all.slice(k * n, (k + 1) * n), [b.batch, b.length]);
    });
    const out = await session.run(feeds);
    const listed = [];
    for (const name of session.outputNames) {
      const t = out[name];
      if (t.type !== 'float32') throw new Error(`output ${name} is ${t.type}, expected float32`);
      fs.writeFileSync(path.join(manifest.out_dir, `b${i}_${name}.bin`),
                       Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength));
      listed.push({ name, dims: t.dims.map(Number) });
    }
    result.outputs.push(listed);
  }
  fs.writeFileSync(path.join(manifest.out_dir, 'result.json'), JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_run.js: ${e.message || e}`);
  process.exit(1);
});
