"""The faces of rollscope: the `rollscope` command line and the Streamlit dashboard."""
