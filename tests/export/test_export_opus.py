"""An OPUS-MT directory exported: CTranslate2 translates as mtkit does."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("ctranslate2")

# Lines whose translations by the test model end before the length limit, where CTranslate2 (like Transformers)
# forces EOS with probability 1 and mtkit scores it as the model does.
LINES = "Two dogs play in the snow.\nPEOPLE WALKING.\nA MAN IN A BLUE SHIRT IS STANDING ON A LADDER.\nA GIRL!\n"
OPTIONS = ("--beam", "4", "--max-len-a", "0", "--max-len-b", "28", "--device", "cpu")


def test_ctranslate2_export_translates_as_mtkit_does(cli, opus_dir, tmp_path):
    out = tmp_path / "ct2"
    done = cli("export", opus_dir, "--format", "ctranslate2", "-o", out)
    assert done.returncode == 0, done.stderr
    mine = cli("translate", "-m", opus_dir, *OPTIONS, input=LINES)
    theirs = cli("translate", "-m", out, *OPTIONS, input=LINES)
    assert mine.returncode == 0 and theirs.returncode == 0, theirs.stderr
    assert theirs.stdout == mine.stdout
