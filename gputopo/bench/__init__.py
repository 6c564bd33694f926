"""``bench-p2p``: options and defaults (``options``), results and their JSON (``results``), the
TensorFlow copy engine (``engine``) and the run over every pair with step timeouts (``run``).

``options`` and ``results`` import no TensorFlow; ``engine`` and ``run`` get it from
``gputopo.tfruntime``.
"""
