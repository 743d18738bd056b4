"""onnx_check.py MODEL.onnx: the ONNX checker (onnx.checker.check_model with full_check, which runs shape
inference) on a model `bertrain export-onnx` wrote, then a JSON summary on stdout for
tests/io/onnx_export_test.cpp: ir_version, opsets, the inputs and outputs (name, element type, dims as numbers or
dim_param names), metadata_props, the operator types and their domains. Uses Debian's python3-onnx."""
import json
import sys

import onnx


def dims(value_info):
    out = []
    for d in value_info.type.tensor_type.shape.dim:
        out.append(d.dim_param if d.HasField("dim_param") else d.dim_value)
    return out


def main():
    model = onnx.load(sys.argv[1])
    onnx.checker.check_model(model, full_check=True)
    g = model.graph
    print(json.dumps({
        "ir_version": model.ir_version,
        "producer_name": model.producer_name,
        "opset": {o.domain: o.version for o in model.opset_import},
        "inputs": [[i.name, i.type.tensor_type.elem_type, dims(i)] for i in g.input],
        "outputs": [[o.name, o.type.tensor_type.elem_type, dims(o)] for o in g.output],
        "metadata": {p.key: p.value for p in model.metadata_props},
        "ops": sorted({n.op_type for n in g.node}),
        "domains": sorted({n.domain for n in g.node}),
        "initializers": len(g.initializer),
    }, sort_keys=True))


if __name__ == "__main__":
    main()
