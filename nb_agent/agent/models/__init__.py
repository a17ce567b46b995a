"""Local models people download once and then run offline: the recommended table (``catalog``),
pulling a GGUF file from the Hugging Face Hub (``hub``) or a model into a running Ollama
(``ollama``), and which downloaded model the built-in agent runs by default (``default``)."""
