"""cairn inside agent frameworks: LangChain, LlamaIndex, and function tools for tool-calling models."""
