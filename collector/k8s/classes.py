"""The classifier moved to gpuledger/classify.py, where the admission webhook may import it too (the stages may not
import each other); its names stay importable from here."""

from gpuledger.classify import (  # noqa: F401
    GENERIC,
    KINDS,
    LABELS,
    SYSTEM_NAMESPACES,
    Owner,
    Verdict,
    classify,
    classify_object,
    kind_class,
    owner_of,
)
