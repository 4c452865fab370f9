"""What a model can do. A task says which of these it needs (``posixlab/tasks/``); a backend says which it has
(``posixlab/backends.py``); the run checks the two agree before any work."""

GENERATE = "generate"  # greedy text for a prompt: every model
SCORE = "score"  # log P(continuation | prompt) on token ids: in-process transformers, vLLM
STRUCTURED = "structured"  # a JSON object of a given schema through instructor (strategy=structured): chat APIs
