"""Hyperplane similarity and clustering scores (claim C6) against independent computations."""
import itertools
import math

import numpy as np
import pytest
import torch

from dlgn_lib import clusters


def brute_force_score(vectors, threshold):
    """Share of rows whose nearest other row has |cos| >= threshold, by a plain double loop."""
    rows = [list(map(float, v)) for v in vectors]
    hits = 0
    for i, a in enumerate(rows):
        best = -1.0
        for j, b in enumerate(rows):
            if i == j:
                continue
            dot = sum(p * q for p, q in zip(a, b))
            cos = abs(dot) / (math.sqrt(sum(p * p for p in a)) * math.sqrt(sum(q * q for q in b)))
            best = max(best, cos)
        hits += best >= threshold
    return hits / len(rows)


def planted(n_groups, per_group, d, spread, rng):
    """Rows near ``n_groups`` orthonormal directions, each row with a random sign and scale."""
    centres = np.linalg.qr(rng.standard_normal((d, n_groups)))[0].T
    rows = [centres[g] + spread * rng.standard_normal(d) for g in range(n_groups) for _ in range(per_group)]
    rows = np.array(rows) * rng.choice([-1.0, 1.0], size=(len(rows), 1)) * rng.uniform(0.5, 3, (len(rows), 1))
    return rows, np.repeat(np.arange(n_groups), per_group)


def test_identical_hyperplanes_form_one_cluster_with_score_one():
    v = np.random.default_rng(0).standard_normal(7)
    rows = np.outer([1.0, 2.0, 0.5, 3.0, 1.5], v)  # one direction, different lengths
    assert clusters.clustering_score(rows) == 1.0
    assert clusters.cluster_count(rows) == 1


@pytest.mark.parametrize("m, d", [(5, 5), (4, 9)])
def test_orthogonal_hyperplanes_give_m_clusters_and_score_zero(m, d):
    rows = np.linalg.qr(np.random.default_rng(1).standard_normal((d, m)))[0].T * 3.0
    assert clusters.clustering_score(rows) == 0.0
    assert clusters.cluster_count(rows) == m
    assert np.allclose(clusters.abs_cosine_matrix(rows), np.eye(m), atol=1e-12)


def test_sign_flip_is_the_same_hyperplane():
    v = np.random.default_rng(2).standard_normal(6)
    w = np.random.default_rng(3).standard_normal(6)
    w -= (w @ v) / (v @ v) * v  # orthogonal to v
    rows = np.stack([v, -v, 2 * w, -0.5 * w])
    cos = clusters.abs_cosine_matrix(rows)
    assert cos[0, 1] == pytest.approx(1.0) and cos[2, 3] == pytest.approx(1.0)
    assert clusters.clustering_score(rows) == 1.0
    labels = clusters.cluster_labels(rows)
    assert labels[0] == labels[1] and labels[2] == labels[3] and labels[0] != labels[2]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("threshold", [0.5, 0.9])
def test_score_matches_brute_force_double_loop(seed, threshold):
    rng = np.random.default_rng(seed)
    # Half planted near-twins, half random: a score strictly between 0 and 1.
    near, _ = planted(4, 3, 30, 0.04, rng)
    rows = np.concatenate([near, rng.standard_normal((10, 30))])
    expected = brute_force_score(rows, threshold)
    assert 0 < expected < 1
    assert clusters.clustering_score(rows, threshold) == expected
    assert clusters.clustering_score(torch.tensor(rows, dtype=torch.float64), threshold) == expected


@pytest.mark.parametrize("seed", range(3))
def test_cluster_count_finds_planted_groups(seed):
    rows, groups = planted(5, 4, 12, 0.05, np.random.default_rng(10 + seed))
    labels = clusters.cluster_labels(rows, 0.9)
    assert clusters.cluster_count(rows, 0.9) == 5
    # Same partition as the planted groups, up to renaming.
    assert len(set(zip(labels.tolist(), groups.tolist()))) == 5


def test_complete_linkage_clusters_respect_the_threshold_pairwise():
    rows = np.random.default_rng(20).standard_normal((30, 6))
    labels = clusters.cluster_labels(rows, 0.6)
    assert 1 < len(set(labels.tolist())) < len(rows)  # a non-trivial partition
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    for i, j in itertools.combinations(range(len(rows)), 2):
        if labels[i] == labels[j]:
            assert abs(unit[i] @ unit[j]) >= 0.6 - 1e-12


@pytest.mark.parametrize("method", clusters.LINKAGES)
def test_clustered_order_is_a_permutation_that_groups_clusters(method):
    rng = np.random.default_rng(5)
    rows, groups = planted(3, 5, 10, 0.05, rng)
    shuffle = rng.permutation(len(rows))
    order = clusters.clustered_order(rows[shuffle], method=method)
    assert sorted(order.tolist()) == list(range(len(rows)))
    # Planted groups come out as contiguous blocks: the group changes only twice along the order.
    along = groups[shuffle][order]
    assert int(np.sum(along[1:] != along[:-1])) == 2


def test_layer_table_columns_and_values():
    rng = np.random.default_rng(7)
    near, _ = planted(2, 3, 5, 0.01, rng)
    layers = [np.eye(4), near]
    table = clusters.layer_table(layers, 0.9, model="dlgn")
    assert table["layer"].tolist() == [1, 2] and table["m"].tolist() == [4, 6]
    assert table["score"].tolist() == [0.0, 1.0]
    assert table["n_clusters"].tolist() == [4, 2]
    assert table["cluster_share"].tolist() == [1.0, 2 / 6]
    assert table["model"].tolist() == ["dlgn", "dlgn"]
    cos = np.abs(near @ near.T) / np.outer(np.linalg.norm(near, axis=1), np.linalg.norm(near, axis=1))
    assert table["mean_abs_cos"][1] == pytest.approx(cos[np.triu_indices(6, 1)].mean())


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="threshold"):
        clusters.clustering_score(np.eye(3), 1.5)
    with pytest.raises(ValueError, match="zero rows"):
        clusters.abs_cosine_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="method"):
        clusters.cluster_count(np.eye(3), method="ward")
    with pytest.raises(ValueError, match="at least 2"):
        clusters.clustering_score(np.ones((1, 3)))


def test_identical_directions_have_one_direction_and_collapse_one():
    rows = np.outer([1.0, -2.0, 0.5, 3.0], [0.3, -1.0, 2.0])   # one line, signs and scales vary
    assert clusters.effective_directions(rows) == pytest.approx(1.0)
    assert clusters.collapse(rows) == pytest.approx(1.0)
    assert clusters.cluster_counts(rows, [0.5, 0.9, 0.99]) == {0.5: 1, 0.9: 1, 0.99: 1}


@pytest.mark.parametrize("k,copies,d", [(3, 1, 3), (3, 4, 5), (4, 2, 4)])
def test_k_orthogonal_lines_used_equally_give_k_directions(k, copies, d):
    rng = np.random.default_rng(k + d)
    basis = np.linalg.qr(rng.standard_normal((d, k)))[0].T
    rows = np.repeat(basis, copies, axis=0) * rng.choice([-1.0, 1.0], size=(k * copies, 1))
    assert clusters.effective_directions(rows) == pytest.approx(k)
    r = min(k * copies, d)
    assert clusters.collapse(rows) == pytest.approx((r - k) / (r - 1))
    assert clusters.cluster_counts(rows, [0.1, 0.9]) == {0.1: k, 0.9: k}


@pytest.mark.parametrize("m,d", [(5, 12), (30, 6)])
def test_effective_directions_matches_the_pairwise_cosine_sum(m, d):
    """Σλ² = trace(M²) = (1/m²) Σ_ij cos²(u_i, u_j): a second computation, by a double loop."""
    rng = np.random.default_rng(m * d)
    rows = rng.standard_normal((m, d)) * rng.uniform(0.2, 4, (m, 1))
    total = 0.0
    for a in rows:
        for b in rows:
            total += (a @ b) ** 2 / ((a @ a) * (b @ b))
    assert clusters.effective_directions(rows) == pytest.approx(m * m / total, rel=1e-10)
    assert 1.0 <= clusters.effective_directions(rows) <= min(m, d) + 1e-9


def test_layer_table_reports_directions_and_collapse():
    table = clusters.layer_table([np.eye(4), np.ones((3, 4))], 0.9)
    assert table["n_directions"].tolist() == pytest.approx([4.0, 1.0])
    assert table["collapse"].tolist() == pytest.approx([0.0, 1.0])
