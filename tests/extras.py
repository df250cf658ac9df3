"""Optional extras some tests need. The `tn` extra (WeTextProcessing with pynini, and num2words) speaks
numbers and dates; `.[test]` installs it, so CI runs these tests. Where it cannot be installed (the GPU
image: pynini's ~170 MB do not travel there) they are skipped, and the summary counts them."""
import importlib.util

import pytest

TN_INSTALLED = all(importlib.util.find_spec(name) is not None for name in ("tn", "num2words"))
needs_tn = pytest.mark.skipif(not TN_INSTALLED, reason="needs the tn extra: pip install 'voicedesk[tn]'")


def with_tn_marks(names: list[str]) -> list:
    """Golden request names as pytest params, those of normalised text (`normalize_*`) marked needs_tn."""
    return [pytest.param(n, marks=needs_tn) if n.startswith("normalize") else n for n in names]
