"""gpuledger: the shared core every stage imports (schemas, lake, spool, config, query helper, errors, CLI).

Importing this package starts, reads or connects nothing.
"""

__version__ = "0.1.0"
