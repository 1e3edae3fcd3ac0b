"""Integrations of memledger with agent frameworks (``langgraph``: a LangGraph ``BaseStore``)."""
