"""One 100 MB line to `mtkit translate`: cut before SentencePiece sees it, so time and memory stay bounded.

The whole line was encoded before being cut to the model's positions: 50 s and 4.5 GB for 100 MB.
Now the reader keeps at most 1 MiB of a line (mtkit/textio.py) and the encoder at most 32
characters a model token (mtkit/decode/encode.py), each with a warning.
"""

from __future__ import annotations

import io

from mtkit.data.vocab import Vocab
from mtkit.decode.encode import MAX_CHARS_PER_TOKEN
from mtkit.textio import read_lines_lenient


def test_the_reader_keeps_a_bounded_head_of_a_long_line():
    """fault: a line far longer than any model takes; expected: its first MAX bytes read, the next line intact."""
    data = io.BytesIO(b"word " * 100_000 + b"\nnext line\n")
    assert [len(line) for line in read_lines_lenient(data, max_bytes=4096)] == [4096, 9]


def test_translate_never_hands_sentencepiece_more_than_the_model_can_take(cli, cli_model, tmp_path, monkeypatch):
    """fault: one 5 MB line to `translate`; expected: SentencePiece sees a bounded head of it, one output line a
    line, a warning, exit 0."""
    longest: list[int] = []
    real = Vocab.encode_batch

    def measured(self, lines, threads=1):
        longest.append(max(map(len, lines)))
        return real(self, lines, threads)

    monkeypatch.setattr(Vocab, "encode_batch", measured)
    source = tmp_path / "in.txt"
    source.write_text("a man runs\n" + "a dog " * 800_000 + "\nthe end\n")
    done = cli("translate", "-m", cli_model, "-i", source, "--beam", "1", "--max-len-b", "3", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    assert "line 2 has" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert max(longest) <= 1024 * MAX_CHARS_PER_TOKEN  # the tiny model's positions, at most
