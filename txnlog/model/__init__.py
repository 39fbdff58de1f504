"""What every layer shares: the configuration, the errors a user can fix, the rows the decoders emit and the
output contract (every output table's names and types). Imports nothing of txnlog's."""
