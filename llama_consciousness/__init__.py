"""llama-consciousness: a memory LlamaIndex applications can reason over."""

__version__ = "0.1.0"
