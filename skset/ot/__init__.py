r"""Batched, masked entropic optimal transport between sets and references.

For a set :math:`\mathbf{x} = (x_1, \dots, x_n)` and a reference
:math:`\mathbf{z} = (z_1, \dots, z_p)` with similarity :math:`K_{ij} = \langle x_i, z_j \rangle` (the
cost is :math:`C = -K`), the entropic plan of Mialon et al. (2021, eq. 1) is

.. math::

    \mathbf{P}(\mathbf{x}, \mathbf{z}) = \arg\max_{P \in U(a, b)} \langle P, K \rangle
    + \varepsilon H(P), \qquad a = \tfrac{1}{n}\mathbf{1}_n, \quad b = \tfrac{1}{p}\mathbf{1}_p,

computed by Sinkhorn's fixed-point iterations. Every function here takes a batch ``(B, n_max, p)`` of
similarities and a boolean mask ``(B, n_max)`` (``True`` on real elements): padded rows get zero
mass, and ``n`` in ``a`` is each set's real size, so a set's plan never depends on the rest of its
batch.

**Element mass.** With ``weights`` (``(B, n_max)``, non-negative, not all zero on a set's real
elements; padded entries are ignored) the set's measure is :math:`a_i = w_i / \sum_{i'} w_{i'}`
instead of :math:`1/n` (cell counts, quality scores...). An element of mass 0 gets an empty row,
exactly as if it were removed.

**Unbalanced transport.** With ``reg_m`` (:math:`\rho`) the row (set) marginal is relaxed by a KL
penalty while the column (reference) marginal stays exact, so that the plan still sends mass
:math:`1/p` to every support and the OTK pooling keeps its meaning:

.. math::

    \mathbf{P} = \arg\max_{P \ge 0,\ P^\top \mathbf{1}_n = b} \langle P, K \rangle
    - \varepsilon\, \mathrm{KL}(P \,|\, a b^\top) - \rho\, \mathrm{KL}(P \mathbf{1}_p \,|\, a),

POT's ``ot.unbalanced.sinkhorn_unbalanced(a, b, -K, reg=epsilon, reg_m=(rho, inf))`` (its
default ``reg_type="kl"``). Elements of low similarity to every support then receive less
mass than :math:`a_i` (outliers are down-weighted) and the others more; ``reg_m=None`` (or
infinity) is the balanced plan above.
The row update becomes :math:`f = \log a - \lambda\, \mathrm{LSE}_j(K_{ij}/\varepsilon + g_j)`
with :math:`\lambda = \rho / (\rho + \varepsilon)` (Chizat et al. 2018), the column update is
unchanged.

Two solvers share one iteration schedule (start from :math:`g = 0`, update the row potential then
the column potential, ``n_iter`` times, so the column marginals hold exactly):

* ``method="log"``: log-domain updates with ``logsumexp`` (Peyre & Cuturi 2019, Remark 4.23); never
  overflows, two exponentials of the whole ``(B, n, p)`` block per iteration.
* ``method="exp"``: the scaling form :math:`u = a / (E v)`, :math:`v = b / (E^\top u)` on
  :math:`E = \exp((K - \max_j K_{ij}) / \varepsilon)`: one exponential in all, then matrix-vector
  products. The row shift keeps every row's largest entry at 1, so :math:`E v` never vanishes, but a
  column far from every element can still underflow for small epsilon (a set whose plan is then
  not finite is named in a ``RuntimeWarning``). Unbalanced:
  :math:`u = \tilde a / (E v)^\lambda`, where the row shift no longer cancels and moves into
  :math:`\tilde a_i = a_i e^{(1 - \lambda)(m_i - \max_{i'} m_{i'})}` (:math:`m_i` the row's shift;
  the per-set constant cancels in the column update).
* ``method="auto"`` (default): ``"exp"``, then ``"log"`` again for just the sets whose scalings are
  not finite and positive. Same iterates, so the same plan up to rounding, at the exp-domain speed
  where it is safe and the log-domain stability where it is not.

Stopping rule: with ``tol=None`` (or 0) every set gets exactly ``n_iter`` iterations. With a ``tol``,
``n_iter`` is a cap: every ``check_every`` iterations (5 by default) each set's row-marginal error
:math:`\|P\mathbf{1}_p - a\|_1` (the column marginals hold exactly) is read off the row sums that
the next row update computes anyway (:math:`u \odot Ev` in the exp domain, the row ``logsumexp``
in the log domain: no extra pass over the block), and a set whose error is at most ``tol`` keeps
that plan. Unbalanced, the target is not :math:`a` but the row sums :math:`t` the next row update
would give, scaled to total mass 1: :math:`\|P\mathbf{1}_p - t / \sum t\|_1`, which is 0 exactly at
a fixed point of the iterations (and is the balanced error when :math:`\rho` is infinite).
A block stops once all its sets have, and sets that stopped are dropped from the
iterations when they are half of the block. Each set stops on its own error, so its plan still does
not depend on its batch. Under autograd (grad enabled and ``similarity`` or ``weights`` requiring
grad) ``tol`` is ignored and ``n_iter`` iterations run, so that the backward pass differentiates a fixed,
deterministic computation.

References
----------
.. [1] G. Mialon, D. Chen, A. d'Aspremont, J. Mairal. A Trainable Optimal Transport Embedding for
   Feature Aggregation and its Relationship to Attention. ICLR 2021.
.. [2] M. Cuturi. Sinkhorn Distances: Lightspeed Computation of Optimal Transport. NeurIPS 2013.
.. [3] G. Peyre, M. Cuturi. Computational Optimal Transport. Foundations and Trends in ML, 2019.
.. [4] L. Chizat, G. Peyre, B. Schmitzer, F.-X. Vialard. Scaling algorithms for unbalanced optimal
   transport problems. Mathematics of Computation, 2018.

The package: the eager solvers (``_sinkhorn.py``), the positional weights (``_positions.py``),
the ``torch.compile`` kernels of the OTK embedding with their process-wide caches
(``_compiled.py``, where the choice between compiled and eager code is made) and what they share
(``_common.py``: argument checks, the unbalanced relaxation, the export test).
"""

from ._positions import position_log_weights, position_weights
from ._sinkhorn import sinkhorn, sinkhorn_exp, sinkhorn_log, transport_similarity

__all__ = ["sinkhorn", "sinkhorn_log", "sinkhorn_exp", "transport_similarity", "position_weights",
           "position_log_weights"]
