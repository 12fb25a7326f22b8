"""Code-execution reward for rlvr-plugins: run a completion's Python program against test cases in a sandbox."""
