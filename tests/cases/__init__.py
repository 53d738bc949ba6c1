"""Op cases of the families of real models, one module each (see tests/op_cases.py)."""
