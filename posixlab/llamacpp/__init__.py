"""The ``llamacpp`` backend: a GGUF file run in this process by llama.cpp (llama-cpp-python), quantized as it is
shipped, as llama.cpp, Ollama and LM Studio run it. ``model.py``: the file, its tokenizer and the passes;
``engine.py``: prompt sets scored with each prompt's beginning run once; ``backend.py``: its registration."""
