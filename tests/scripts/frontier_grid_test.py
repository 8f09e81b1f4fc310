#!/usr/bin/env python3
"""Tests of scripts/frontier_grid.py's frontier arithmetic and pairing (no binary needed)."""

import json
import math
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
import frontier_grid as fg  # noqa: E402


def cell(window, spec, kl, bits):
    return {"window": window, "spec": spec, "kl": kl, "bits_end": bits, "bits_prefill": bits}


class Pareto(unittest.TestCase):
    def test_drops_dominated_points_and_sorts_by_bits(self):
        pts = [(5.0, 1e-3), (4.0, 1e-2), (4.5, 2e-2), (6.0, 1e-3), (8.0, 1e-5), (4.0, 5e-2)]
        self.assertEqual(fg.pareto(pts), [(4.0, 1e-2), (5.0, 1e-3), (8.0, 1e-5)])

    def test_equal_bits_keeps_the_lower_kl(self):
        self.assertEqual(fg.pareto([(5.0, 2e-3), (5.0, 1e-3)]), [(5.0, 1e-3)])


class Envelope(unittest.TestCase):
    front = [(4.0, 1e-2), (6.0, 1e-4), (8.0, 1e-5)]

    def test_interpolates_in_log_kl(self):
        # Halfway from 1e-2 to 1e-4 in log space is 1e-3, not the linear 5e-3.
        self.assertAlmostEqual(math.log10(fg.envelope_at(self.front, 5.0)), -3.0, places=9)
        self.assertAlmostEqual(math.log10(fg.envelope_at(self.front, 7.5)), -4.75, places=9)

    def test_at_a_point_and_outside(self):
        self.assertAlmostEqual(fg.envelope_at(self.front, 6.0), 1e-4)
        self.assertIsNone(fg.envelope_at(self.front, 3.9))
        self.assertEqual(fg.envelope_at(self.front, 12.0), 1e-5)  # flat past the last point
        self.assertIsNone(fg.envelope_at([], 5.0))


class Compare(unittest.TestCase):
    def test_pairs_hqekv_run_at_each_windows_competitor_bits(self):
        cells = [
            cell("a w0", "llama:ctk=q4_0,ctv=q4_0", 1e-2, 4.657),
            cell("a w1", "llama:ctk=q4_0,ctv=q4_0", 3e-2, 4.657),
            cell("a w0", "h2o:bits=3.4", 0.2, 3.3951),
            cell("a w1", "h2o:bits=3.4", 0.1, 3.3804),
            cell("a w0", "hqekv:bits=4.657", 5e-3, 4.5),
            cell("a w1", "hqekv:bits=4.657", 3e-2, 4.5),
            cell("a w0", "hqekv:bits=3.395", 0.1, 3.3),
            cell("a w1", "hqekv:bits=3.380", 0.01, 3.3),
            {"window": "a w0", "spec": "kivi:group=32", "error": "head_dim 8 < group"},
        ]
        points, infeasible = fg.compare(cells, tuning={"a w0"})
        self.assertEqual(infeasible, {"kivi:group=32": "head_dim 8 < group"})
        by = {p["spec"]: p for p in points}
        q4 = by["llama:ctk=q4_0,ctv=q4_0"]
        # Ratio of means, not mean of ratios: (5e-3 + 3e-2) / (1e-2 + 3e-2).
        self.assertAlmostEqual(q4["ratio"], 0.875)
        self.assertEqual(q4["worst"]["window"], "a w1")
        self.assertAlmostEqual(q4["worst"]["ratio"], 1.0)
        self.assertAlmostEqual(q4["ratio_held_out"], 1.0)  # a w0 is the tuning window
        h2o = by["h2o:bits=3.4"]
        # Each window's hqekv run is the one at that window's own end bits.
        self.assertAlmostEqual(h2o["ratio"], (0.1 + 0.01) / (0.2 + 0.1))
        self.assertEqual([p["spec"] for p in points], ["h2o:bits=3.4", "llama:ctk=q4_0,ctv=q4_0"])

    def test_frontier_rows_use_the_envelope_of_the_means(self):
        cells = [
            cell("a w0", "x", 1e-2, 4.0), cell("a w1", "x", 1e-2, 4.0),
            cell("a w0", "y", 1e-4, 6.0), cell("a w1", "y", 1e-4, 6.0),
            cell("a w0", "z", 1e-1, 5.0), cell("a w1", "z", 1e-1, 5.0),  # dominated
            cell("a w0", "hqekv:bits=5.000", 5e-4, 5.0),
            cell("a w1", "hqekv:bits=5.000", 1.5e-3, 5.0),
        ]
        (row,) = fg.frontier_rows(cells)
        self.assertAlmostEqual(row["envelope"], 1e-3)
        self.assertAlmostEqual(row["ratio"], 1.0)
        self.assertFalse(row["clamped"])
        self.assertEqual(row["worst_window"][0], "a w1")
        self.assertAlmostEqual(row["worst_window"][1], 1.5)

    def test_groups_nearby_asked_bits_and_clamps_below_the_first_point(self):
        cells = [
            cell("a w0", "x", 0.2, 3.39), cell("a w1", "x", 0.1, 3.38),
            cell("a w0", "hqekv:bits=3.390", 0.1, 3.2),
            cell("a w1", "hqekv:bits=3.380", 0.05, 3.3),
        ]
        (row,) = fg.frontier_rows(cells)
        self.assertEqual((row["asked"], row["n"], row["windows"]), (3.4, 2, 2))
        # hqekv holds 3.25 bits, below the only competitor point (3.385): read there.
        self.assertTrue(row["clamped"])
        self.assertAlmostEqual(row["envelope"], 0.15)
        self.assertAlmostEqual(row["ratio"], 0.5)


class Saturation(unittest.TestCase):
    def write(self, d, spec, kl, bits):
        with open(os.path.join(d, fg.cell_file(spec)), "w", encoding="utf-8") as f:
            json.dump(cell("a w0", spec, kl, bits), f)

    def test_needs_two_asks_above_the_cap_with_the_same_result(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, fg.hqekv_spec(8.657), 2e-5, 8.438)  # holds what it asked, nearly
            self.write(d, fg.hqekv_spec(10.407), 8e-6, 9.105)
            self.assertIsNone(fg.saturation(d))
            self.write(d, fg.hqekv_spec(11.157), 9e-6, 9.105)  # same bits, other KL: not it
            self.assertIsNone(fg.saturation(d))
            self.write(d, fg.hqekv_spec(12.407), 9e-6, 9.105)  # = the run just below it
            asked, rec = fg.saturation(d)
            self.assertEqual(asked, 11.157)
            self.assertEqual(rec["spec"], "hqekv:bits=11.157")

    def test_a_narrow_plateau_is_not_a_cap(self):
        with tempfile.TemporaryDirectory() as d:
            self.write(d, fg.hqekv_spec(4.159), 0.107, 3.697)
            self.write(d, fg.hqekv_spec(4.175), 0.107, 3.697)
            self.assertIsNone(fg.saturation(d))
            self.write(d, fg.hqekv_spec(5.901), 0.05, 5.677)
            self.assertIsNone(fg.saturation(d))


class Grid(unittest.TestCase):
    def test_default_grid_has_every_llama_pair_and_variant(self):
        g = fg.default_competitors()
        self.assertEqual(sum(s.startswith("llama:") for s in g), 36)
        self.assertEqual(sum(s.startswith("kivi:") for s in g), 8)
        self.assertIn("fp8:format=e5m2", g)
        self.assertEqual(len(g), len(set(g)))
        self.assertEqual(len({fg.cell_file(s) for s in g}), len(g))


class Sweep(unittest.TestCase):
    def test_bits_cover_the_range_at_three_decimals(self):
        self.assertEqual(fg.sweep_bits(2.5, 2.7, 0.05), [2.5, 2.55, 2.6, 2.65, 2.7])
        self.assertEqual(fg.sweep_bits(3.0, 2.0, 0.1), [])

    def test_rises_lists_every_higher_kl_at_more_bits_largest_first(self):
        curve = [(3.0, 0.10), (3.05, 0.05), (3.1, 0.11), (3.15, 0.04)]
        r = fg.rises(curve)
        self.assertAlmostEqual(r[0][0], 0.11 / 0.05)
        self.assertEqual(r[0][1:], (3.05, 3.1))
        self.assertEqual(len(r), 2)  # 3.0 -> 3.1 and 3.05 -> 3.1
        self.assertEqual(fg.rises([(3.0, 0.1), (3.1, 0.05)]), [])

    def test_bad_ranges_are_named(self):
        self.assertIsNone(fg.sweep_args_error(2.5, 6.0, 0.05))
        self.assertIn("--step", fg.sweep_args_error(2.5, 6.0, 0.0))
        self.assertIn("--step", fg.sweep_args_error(2.5, 6.0, -0.1))
        self.assertIn("--hi", fg.sweep_args_error(6.0, 2.5, 0.05))
        self.assertIn("finite", fg.sweep_args_error(2.5, float("nan"), 0.05))
        self.assertIn("10000", fg.sweep_args_error(1.0, 16.0, 1e-5))

    def test_curve_keeps_budgets_measured_on_every_window(self):
        meta = {"sweep": {"lo": 3.0, "hi": 3.1, "step": 0.05, "command": "x"}}
        cells = [cell("a w0", "hqekv:bits=3.000", 0.2, 2.9), cell("a w1", "hqekv:bits=3.000", 0.4, 2.95),
                 cell("a w0", "hqekv:bits=3.050", 0.1, 3.0),
                 cell("a w0", "hqekv:bits=3.100", 0.1, 3.05), cell("a w1", "hqekv:bits=3.100", 0.3, 3.0)]
        curve = fg.sweep_curve(meta, cells)
        self.assertEqual([b for b, _, _ in curve], [3.0, 3.1])
        self.assertAlmostEqual(curve[0][1], 0.3)
        self.assertAlmostEqual(curve[1][2], 3.025)
        self.assertEqual(fg.sweep_curve({}, cells), [])


if __name__ == "__main__":
    unittest.main()
