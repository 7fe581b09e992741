"""Statistics of success rates: Wilson intervals, significance of a difference, offline-vs-online agreement.

- ``wilson_interval(k, n)``: the Wilson score interval of a binomial proportion (95 % by default).
- ``compare_rates(k1, n1, k2, n2)``: a difference of two success rates with the pooled two-proportion z test and
  Fisher's exact test (two-sided p-values both).
- ``pearson``, ``kendall_tau`` (tau-b, ties corrected, as ``scipy.stats.kendalltau``), ``mmrv`` (SIMPLER's mean
  maximum rank violation) and ``agreement`` (all three) between offline (S) and online (R) success rates of a
  checkpoint sweep.
"""

from __future__ import annotations

import math

import numpy as np

from real_is_sim.errors import DataError

Z95 = 1.959963984540054


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``successes`` out of ``n`` ((0, 1) for n = 0)."""
    if n < 0 or successes < 0 or successes > n:
        raise DataError(f"wilson_interval needs 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def rate_summary(successes: int, n: int, digits: int = 4) -> dict:
    """``{"successes", "n", "rate", "wilson95"}`` (rate None for n = 0)."""
    low, high = wilson_interval(successes, n)
    return {"successes": int(successes), "n": int(n), "rate": round(successes / n, digits) if n else None,
            "wilson95": [round(low, digits), round(high, digits)]}


def two_proportion_z(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float]:
    """Pooled two-proportion z test of p1 = p2: (z, two-sided p). z = 0, p = 1 when the pooled rate is 0 or 1."""
    if min(n1, n2) <= 0:
        raise DataError(f"two_proportion_z needs n1, n2 > 0, got {n1}, {n2}")
    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if se == 0.0:
        return 0.0, 1.0
    z = (k1 / n1 - k2 / n2) / se
    return z, math.erfc(abs(z) / math.sqrt(2))


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p of Fisher's exact test on the 2 x 2 table [[k1, n1 - k1], [k2, n2 - k2]]: the probability, under
    the hypergeometric law with the margins fixed, of a table no more likely than the observed one."""
    total, successes = n1 + n2, k1 + k2
    low, high = max(0, successes - n2), min(successes, n1)

    def log_p(a: int) -> float:
        return (math.lgamma(successes + 1) - math.lgamma(a + 1) - math.lgamma(successes - a + 1)
                + math.lgamma(total - successes + 1) - math.lgamma(n1 - a + 1) - math.lgamma(n2 - successes + a + 1)
                - math.lgamma(total + 1) + math.lgamma(n1 + 1) + math.lgamma(n2 + 1))

    observed = log_p(k1)
    p = sum(math.exp(log_p(a)) for a in range(low, high + 1) if log_p(a) <= observed + 1e-7)
    return min(1.0, p)


def compare_rates(k1: int, n1: int, k2: int, n2: int, alpha: float = 0.05) -> dict:
    """Is success rate 1 different from rate 2? Difference, both rates with Wilson intervals, z test and Fisher."""
    z, p_z = two_proportion_z(k1, n1, k2, n2)
    p_f = fisher_exact(k1, n1, k2, n2)
    return {"a": rate_summary(k1, n1), "b": rate_summary(k2, n2), "difference": round(k1 / n1 - k2 / n2, 4),
            "z": round(z, 4), "p_two_proportion": round(p_z, 6), "p_fisher": round(p_f, 6),
            "significant_fisher": bool(p_f < alpha), "alpha": alpha}


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided p of the exact McNemar test for paired outcomes (the same episodes under two settings): ``only_a``
    pairs won by setting a alone, ``only_b`` by b alone; under p_a = p_b each discordant pair is a fair coin."""
    if min(only_a, only_b) < 0:
        raise DataError(f"mcnemar_exact needs counts >= 0, got {only_a}, {only_b}")
    n = only_a + only_b
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if x.shape != y.shape or len(x) < 2 or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise DataError(f"agreement needs two equally long finite sequences of >= 2 values, got {x.shape}, {y.shape}")
    return x, y


def pearson(x, y) -> float:
    """Pearson's r (nan when either sequence is constant)."""
    x, y = _pair(x, y)
    dx, dy = x - x.mean(), y - y.mean()
    denom = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy / denom) if denom > 0 else float("nan")


def kendall_tau(x, y) -> float:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x) (n0 - ties_y)); nan if a sequence is constant."""
    x, y = _pair(x, y)
    i, j = np.triu_indices(len(x), k=1)
    sx, sy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
    denom = math.sqrt(float(np.count_nonzero(sx)) * float(np.count_nonzero(sy)))
    return float(np.sum(sx * sy) / denom) if denom > 0 else float("nan")


def mmrv(offline, online) -> float:
    """SIMPLER's mean maximum rank violation, (1/N) sum_i max_j |R_i - R_j| 1[(S_i > S_j) != (R_i > R_j)], with S the
    offline and R the online success rates of N checkpoints: 0 when offline ranks every pair as online does; a
    violation costs the online gap of the pair it swaps."""
    s, r = _pair(offline, online)
    violated = (s[:, None] > s[None, :]) != (r[:, None] > r[None, :])
    return float(np.mean(np.max(np.abs(r[:, None] - r[None, :]) * violated, axis=1)))


def agreement(offline, online) -> dict:
    """Pearson r, Kendall tau-b and MMRV of offline (S) vs online (R) success rates, and the largest absolute gap."""
    s, r = _pair(offline, online)
    return {"n_checkpoints": len(s), "pearson": pearson(s, r), "kendall_tau": kendall_tau(s, r), "mmrv": mmrv(s, r),
            "max_abs_gap": float(np.max(np.abs(s - r))), "mean_abs_gap": float(np.mean(np.abs(s - r)))}
