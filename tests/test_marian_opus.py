"""OPUS-MT directories (mtkit/marian/opus.py) compute what Transformers' MarianMTModel computes on them."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from mtkit import checkpoint, sources
from mtkit.config import BOS, EOS, PAD, DecodeConfig, ModelConfig
from mtkit.data.marian_vocab import MarianVocab
from mtkit.data.tokenizer import load_tokenizer
from mtkit.decode.beam import beam_search
from tests.support.cli import error_line

transformers = pytest.importorskip("transformers")

SAMPLE_LINES = [
    "A man in a blue shirt is standing on a ladder.",
    "Two dogs play in the snow.",
    "A girl!",
    "People walking down a busy city street at night while it rains.",
    "",
    "An old woman sells fruit at a market stall.",
]
MAX_LENGTH = 12  # Transformers' max_length: the decoder start + at most 11 tokens, the last one EOS


def load_both(path):
    ckpt = sources.find(path).checkpoint()
    model = checkpoint.build_from(ckpt).eval()
    vocab = load_tokenizer(ckpt["vocab"])
    assert isinstance(vocab, MarianVocab)
    hf = transformers.MarianMTModel.from_pretrained(path).eval()
    tok = transformers.MarianTokenizer.from_pretrained(path)
    return model, vocab, hf, tok


def mtkit_source(vocab: MarianVocab, lines: list[str]) -> torch.Tensor:
    rows = [torch.tensor([*vocab.encode(line), EOS]) for line in lines]
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=PAD)


def as_marian(vocab: MarianVocab, ids: list[int]) -> list[int]:
    return [vocab.ids.marian_of[i] for i in ids]


def test_the_tokenizer_gives_marian_tokenizers_ids(opus_multilingual_dir):
    tok = transformers.MarianTokenizer.from_pretrained(opus_multilingual_dir)
    vocab = load_tokenizer(sources.find(opus_multilingual_dir).checkpoint()["vocab"])
    lines = [*SAMPLE_LINES, ">>fra<< A dog runs.", ">>ces<<Two cats.", "Ünïcödé ☃ text"]
    for line in lines:
        expected = tok(line).input_ids[:-1]  # without its </s>, which mtkit's pipeline appends
        assert as_marian(vocab, vocab.encode(line)) == expected, line
    code = vocab.encode(">>fra<< A dog runs.")[0]
    assert vocab.ids.marian_of[code] == tok.convert_tokens_to_ids(">>fra<<")  # one id, as MarianTokenizer's
    targets = ["Ein Hund läuft.", "Zwei Männer"]
    assert [as_marian(vocab, ids) for ids in vocab.encode_target_batch(targets)] == [
        ids[:-1] for ids in tok(text_target=targets).input_ids
    ]
    ids = tok(text_target="Ein Hund läuft im Schnee.").input_ids[:-1]
    assert vocab.decode([vocab.ids.mtkit_of[i] for i in ids]) == tok.decode(ids)


def test_the_renumbering_is_a_bijection_with_one_added_row(opus_dir):
    vocab = load_tokenizer(sources.find(opus_dir).checkpoint()["vocab"])
    marian = json.loads((opus_dir / "vocab.json").read_text())
    ids = vocab.ids
    assert len(vocab) == len(marian) + 1
    assert (ids.marian_of[PAD], ids.marian_of[BOS], ids.marian_of[EOS]) == (marian["<pad>"],) * 2 + (0,)
    assert sorted(ids.marian_of[i] for i in range(len(vocab)) if i != BOS) == list(range(len(marian)))
    assert all(ids.marian_of[ids.mtkit_of[m]] == m for m in range(len(marian)))
    assert sum(ids.mtkit_of[m] == m for m in range(len(marian))) >= len(marian) - 5  # most ids are Marian's own
    assert load_tokenizer(vocab.proto).proto == vocab.proto


def test_teacher_forced_logits_agree_within_1e_5(opus_dir):
    model, vocab, hf, tok = load_both(opus_dir)
    batch = tok(SAMPLE_LINES[:4], return_tensors="pt", padding=True)
    targets = tok(text_target=SAMPLE_LINES[:4], return_tensors="pt", padding=True).input_ids  # any ids will do
    start = torch.full((4, 1), hf.config.decoder_start_token_id)
    tgt_marian = torch.cat([start, targets[:, :-1]], dim=1)
    index = torch.tensor(vocab.ids.mtkit_of)
    with torch.no_grad():
        expected = hf(**batch, decoder_input_ids=tgt_marian).logits  # (B, T, V)
        got = model(mtkit_source(vocab, SAMPLE_LINES[:4]), index[tgt_marian].masked_fill(tgt_marian.eq(start), BOS))
    pad = hf.config.pad_token_id
    real = torch.ones(expected.size(-1), dtype=torch.bool)
    real[pad] = False
    assert (got[..., index][..., real] - expected[..., real]).abs().max() < 1e-5
    # <pad>'s two rows hold its probability mass between them: every log-probability is Marian's
    both = torch.logsumexp(got[..., [PAD, BOS]], dim=-1)
    assert (both - expected[..., pad]).abs().max() < 1e-5
    lp_got, lp_expected = got.log_softmax(-1)[..., index][..., real], expected.log_softmax(-1)[..., real]
    mask = tgt_marian.ne(pad) | tgt_marian.eq(start)
    assert (lp_got - lp_expected)[mask].abs().max() < 1e-5


def generate(hf, tok, lines, max_length=MAX_LENGTH, **options):
    batch = tok(lines, return_tensors="pt", padding=True)
    pad = hf.config.pad_token_id
    out = hf.generate(**batch, max_length=max_length, bad_words_ids=[[pad]], do_sample=False, **options)
    return [[i for i in row[1:].tolist() if i not in (pad, 0)] for row in out]


def search(model, vocab, lines, config):
    result = beam_search(model, mtkit_source(vocab, lines), config)
    return [as_marian(vocab, hyps[0].tokens) for hyps in result.hypotheses]


@pytest.mark.parametrize("path", ["opus_dir", "opus_multilingual_dir"])
def test_greedy_outputs_equal_generate(path, request):
    model, vocab, hf, tok = load_both(request.getfixturevalue(path))
    lines = [*SAMPLE_LINES, ">>deu<< A dog.", ">>fra<< A dog."] if "multi" in path else SAMPLE_LINES
    config = DecodeConfig(beam=1, max_len_a=0, max_len_b=MAX_LENGTH - 2, lenpen="none")
    assert search(model, vocab, lines, config) == generate(hf, tok, lines, num_beams=1)


def test_beam_4_outputs_equal_generate(opus_dir):
    """Every output, those cut off by the length limit too: there the model's config.json asks for `</s>`
    (forced_eos_token_id), which Transformers forces with probability 1 (ForcedEOSTokenLogitsProcessor),
    and so does mtkit for such a model (ModelConfig.forced_eos)."""
    model, vocab, hf, tok = load_both(opus_dir)
    assert model.cfg.forced_eos
    lines = SAMPLE_LINES + [line.upper() for line in SAMPLE_LINES]
    longest = 30
    for penalty in (1.0, 0.6):
        # Transformers' length penalty is |Y|^alpha with EOS counted; early_stopping=True ends a sentence
        # once `beam` hypotheses have ended, the rule mtkit calls patience.
        config = DecodeConfig(
            beam=4, alpha=penalty, lenpen="fairseq", early_stop="patience", max_len_a=0, max_len_b=longest - 2
        )
        expected = generate(hf, tok, lines, longest, num_beams=4, length_penalty=penalty, early_stopping=True)
        assert any(len(ids) == longest - 2 for ids in expected), "no output was cut off by the length limit"
        assert search(model, vocab, lines, config) == expected


def test_only_a_model_that_asks_for_it_has_eos_forced(opus_dir, tmp_path):
    """forced_eos follows the directory's own generation settings; mtkit's own models never force it."""
    unforced = tmp_path / "unforced"
    shutil.copytree(opus_dir, unforced)
    for name in ("config.json", "generation_config.json"):
        if (unforced / name).exists():
            data = json.loads((unforced / name).read_text())
            data.pop("forced_eos_token_id", None)
            (unforced / name).write_text(json.dumps(data))
    assert checkpoint.config_of(sources.find(unforced).checkpoint()).forced_eos is False
    assert checkpoint.config_of(sources.find(opus_dir).checkpoint()).forced_eos is True
    assert ModelConfig().forced_eos is False


def test_translate_sample_and_score_through_the_cli(cli, opus_dir, tmp_path):
    options = ("--max-len-a", "0", "--max-len-b", "10", "--device", "cpu")
    text = "\n".join(SAMPLE_LINES[:3]) + "\n"
    done = cli("translate", "-m", opus_dir, "--beam", "4", *options, input=text)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    done = cli("translate", "-m", opus_dir, "--sampling", "--seed", "3", *options, input=text)
    assert done.returncode == 0 and len(done.stdout.splitlines()) == 3, done.stderr
    pairs = "A dog runs.\tEin Hund läuft.\nTwo men.\tZwei Männer.\n"
    done = cli("translate", "-m", opus_dir, "--score-only", "--device", "cpu", input=pairs)
    assert done.returncode == 0, done.stderr
    model, vocab, hf, tok = load_both(opus_dir)
    batch = tok(["A dog runs."], text_target=["Ein Hund läuft."], return_tensors="pt")
    with torch.no_grad():
        loss = hf(**batch).loss  # mean over the target tokens, EOS included
    logprob, _, length = done.stdout.splitlines()[0].split("\t")
    assert int(length) == batch["labels"].size(1)
    assert abs(float(logprob) + float(loss) * int(length)) < 1e-3


def test_info_describes_the_directory(cli, opus_dir):
    done = cli("info", opus_dir)
    assert done.returncode == 0, done.stderr
    assert "swish" in done.stdout
    head = done.stdout.splitlines()[0]
    assert "Hugging Face Marian directory, read as an mtkit model" in head, head
    assert "a Hugging Face Marian directory carries no run record" in done.stdout


def copy_with(tmp_path, opus_dir, name, **changes):
    path = tmp_path / name
    shutil.copytree(opus_dir, path)
    for file, fields in changes.items():
        data = json.loads((path / file).read_text())
        data.update(fields)
        (path / file).write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"config.json": {"activation_function": "gelu"}}, "activation_function 'gelu'"),
        ({"tokenizer_config.json": {"separate_vocabs": True}}, "separate_vocabs is True"),
        ({"config.json": {"decoder_start_token_id": 1}}, "decoder_start_token_id is 1"),
        ({"config.json": {"eos_token_id": 5}}, "eos_token_id is 5"),
        ({"config.json": {"decoder_vocab_size": 7}}, "decoder_vocab_size is 7"),
        ({"generation_config.json": {"forced_eos_token_id": 5}}, "forced_eos_token_id is 5"),
    ],
)
def test_what_mtkit_cannot_represent_is_one_sentence_naming_it(cli, opus_dir, tmp_path, changes, named):
    path = copy_with(tmp_path, opus_dir, "changed", **changes)
    line = error_line(cli("translate", "-m", path, input="A dog.\n"))
    assert named in line


def test_a_damaged_weights_file_is_one_sentence(cli, opus_dir, tmp_path):
    """The weights are read a tensor at a time (mtkit.marian.sizes.Weights): a file cut short is still said at once."""
    path = copy_with(tmp_path, opus_dir, "damaged")
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])
    line = error_line(cli("translate", "-m", path, input="A dog.\n"))
    assert "model.safetensors is not a readable safetensors file" in line
