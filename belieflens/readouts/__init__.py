"""Read-outs: a query rendered into token-aligned ids (chat template, context, continuations).

:func:`render` turns a :class:`~belieflens.episodes.base.Query` into a
:class:`TokenizedQuery`: the exact context ids, the answer position and every option's
continuation ids, split where the joint tokenisation splits. The belief questions themselves
are built in :mod:`belieflens.episodes`.
"""

from belieflens.readouts.render import TokenizedQuery, bos_policy, chat_template_hash, render

__all__ = ["TokenizedQuery", "bos_policy", "chat_template_hash", "render"]
