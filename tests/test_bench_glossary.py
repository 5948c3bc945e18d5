"""bench/glossary.py's building blocks: what counts as a term produced, the command its record keeps, its table."""

from __future__ import annotations

import mtkit
from tests.support.recipes import load_script


def test_a_term_counts_as_a_whole_word_at_most_as_often_as_asked():
    produced = load_script("bench/glossary.py").produced
    outputs = ["Ein Herr und ein Herr.", "Der Herrn Hut.", "eine Schar von Leuten", "Herr"]
    wanted = [["Herr"], ["Herr"], ["eine Schar von", "Leute"], ["Herr", "Herr"]]
    assert produced(outputs, wanted) == (3, 6)  # 1 + 0 (Herrn) + 1 (not Leuten) + 1 of 2


def test_the_record_names_no_path_of_the_measuring_machine_and_its_glossary_applies():
    bench = load_script("bench/glossary.py")
    said = bench.command(["--model", "/somewhere/models/model.pt", "--beam", "4", "--out", "/tmp/x", "--name", "s"])
    assert said == "python bench/glossary.py --model model.pt --beam 4 --name s"
    glossary = mtkit.Glossary.of(bench.GLOSSARY)  # a valid glossary: no source twice, no empty side
    sources = [line for name in bench.SETS for line in bench.read(name, "en")]
    assert sum(1 for line in sources if glossary.find(line)) >= 200
    assert any(" " in source for source in bench.GLOSSARY)  # multi-word terms among them
