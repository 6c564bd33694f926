"""The training child (``python -m gputopo.train.child``, started by ``gputopo train``): the only
side of training that runs TensorFlow.

``main`` (flags -> the synchronous loop, or hands over to ``ps_loop``, the parameter-server loop),
``common`` (what both loops share: state, steps, saves, NaN checks, errors), ``progress`` (progress
bar, epoch records, the run summary), ``strategy`` (the ``tf.distribute`` strategy and devices),
``data`` (input pipelines), ``models``.
"""
