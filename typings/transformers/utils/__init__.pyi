# See ../__init__.pyi: why pyright reads this stand-in instead of transformers itself.
from typing import Any

def __getattr__(name: str) -> Any: ...
