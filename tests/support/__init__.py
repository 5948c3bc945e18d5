"""What the tests share, one concept a module; conftest.py files only declare fixtures built from these.

- cli: ROOT and `run_cli` (the real `mtkit` command, in this process or a subprocess); inprocess: how.
- corpora: toy parallel text and binarized data directories; archives: WMT-shaped archives and their server.
- spm: SentencePiece with mtkit's fixed ids, learned by `mtkit.data.vocab.train_bpe` as `mtkit bpe` learns it.
- models: seeded random tiny models, runs saved as training saves them, a tiny model trained on the toy task.
- training: tiny training runs (in this process or the real CLI in the background) and what they leave.
- metrics: RUN/metrics.jsonl read by `mtkit.plot.read_records`, the reader under `mtkit plot`.
- torchrun: two gloo ranks on this machine through torch's own launcher.
- serve, fake_service, gated: a real `mtkit serve` process, a fake in-process one, the gated decoder.
- signals: a signal delivered right after a given call returns, for the races of Ctrl-C and SIGTERM.
- recipes: a recipe's run.sh and the commands its dry run prints, parsed by mtkit's own parsers.
"""
