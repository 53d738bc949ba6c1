"""graphc.onnx: ONNX models in and out (needs the optional `onnx` package: graphc[onnx]).

`import_model(model)` reads a ModelProto or a file into a Graph; `export_model(graph)`
writes one (see each function); `InferenceSession(model)` runs a model with
onnxruntime's Python API. `supported_op_types()` lists the ONNX ops graphc reads.
Importing this package gives every op with an ONNX form its "onnx" rule
(`get_op(op).rules["onnx"]`): a `direct.Direct` entry or an exporter function.
"""

from graphc.onnx import direct as _direct  # noqa: F401 - registers handlers and "onnx" rules
from graphc.onnx import exporters as _exporters  # noqa: F401 - registers "onnx" rules
from graphc.onnx import exporters_arrays as _exporters_arrays  # noqa: F401 - registers rules
from graphc.onnx import exporters_control as _exporters_control  # noqa: F401 - registers rules
from graphc.onnx import exporters_grad as _exporters_grad  # noqa: F401 - registers rules
from graphc.onnx import exporters_math as _exporters_math  # noqa: F401 - registers rules
from graphc.onnx import exporters_nn as _exporters_nn  # noqa: F401 - registers rules
from graphc.onnx import handlers_activation as _handlers_activation  # noqa: F401 - registers handlers
from graphc.onnx import handlers_arrays as _handlers_arrays  # noqa: F401 - registers handlers
from graphc.onnx import handlers_control as _handlers_control  # noqa: F401 - registers handlers
from graphc.onnx import handlers_index as _handlers_index  # noqa: F401 - registers handlers
from graphc.onnx import handlers_loss as _handlers_loss  # noqa: F401 - registers handlers
from graphc.onnx import handlers_math as _handlers_math  # noqa: F401 - registers handlers
from graphc.onnx import handlers_nn as _handlers_nn  # noqa: F401 - registers handlers
from graphc.onnx import handlers_pool as _handlers_pool  # noqa: F401 - registers handlers
from graphc.onnx import handlers_recurrent as _handlers_recurrent  # noqa: F401 - registers handlers
from graphc.onnx import handlers_resize as _handlers_resize  # noqa: F401 - registers handlers
from graphc.onnx import handlers_shape as _handlers_shape  # noqa: F401 - registers handlers
from graphc.onnx.importer import OnnxError, supported_op_types
from graphc.onnx.reader import import_model, initializers
from graphc.onnx.session import InferenceSession
from graphc.onnx.writer import export_model

__all__ = [
    "InferenceSession",
    "OnnxError",
    "export_model",
    "import_model",
    "initializers",
    "supported_op_types",
]
