"""How live providers talk to a carbon API: bounded, secret-safe HTTP.

``client`` is the one HTTP client every live provider shares (deadline, 2xx
only, every fault a ``SignalError``); ``body`` reads an untrusted body under a
cap; ``credentials`` reads secrets from the environment or a file; ``redact``
masks them in any text that could leave the process. None of it knows about
carbon intensity. Nothing is imported here: each module is loaded when it is named.
"""
