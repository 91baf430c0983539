# A stand-in for transformers' own (inline) types, read by pyright instead of the package: the
# package's __init__ imports every model family, so resolving it costs pyright 40 s of the check
# and 2,800 files; codeloop uses a handful of names from it (the embedding code, one test).
from typing import Any

def __getattr__(name: str) -> Any: ...
