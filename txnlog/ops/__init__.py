"""What an operator runs: the ``txnlog`` command and its verbs, ``fence``, and the notebooks' report."""
