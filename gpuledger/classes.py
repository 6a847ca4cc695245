"""The kinds of work a job can be (the jobs table's `workload_class`), and the label that names one outright.

Apart from gpuledger/schema.py because the config checks [[classes]] rows against it, and the enforcer's request
path imports the config but must not import polars (the import-linter contracts in pyproject.toml).
"""

WORKLOAD_CLASSES = ("training", "inference", "notebook", "evaluation", "other")
# A pod's own answer, above every rule (docs/workload-classes.md).
CLASS_LABEL = "gpuledger.io/class"
