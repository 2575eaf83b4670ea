"""The run's picture: a PNG of the expected size that is not blank, the same bytes for the same data, and the
marks of a preemption and its resume."""

from __future__ import annotations

import pytest

from jobs.observed import attempt_lines, step_points
from jobs.plot import DPI, SIZE_INCHES, Marker, draw, markers
from tests.jobs.test_observed import FILES, RAY, T0, view

WIDTH, HEIGHT = int(SIZE_INCHES[0] * DPI), int(SIZE_INCHES[1] * DPI)


def read_png(path):
    import matplotlib.image

    return matplotlib.image.imread(path)


def test_the_marks_of_a_preemption_and_its_resume():
    figures = view().goodput(now=T0 + 5000)
    assert markers(figures.losses, {1: None, 2: 2}) == [
        Marker(4.0, "attempt 1: preemption", "preemption"),
        Marker(2.0, "attempt 2 resumed from step 2", "resume"),
    ]


def test_the_plot_is_a_png_of_the_expected_size_and_not_blank(tmp_path):
    points = step_points(attempt_lines(FILES, RAY), "verl")
    marks = markers(view().goodput(now=T0 + 5000).losses, {2: 2})
    out = draw(points, marks, "verl", "dev-abc: 2 attempts", tmp_path / "plots" / "run.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = read_png(out)
    assert pixels.shape[:2] == (HEIGHT, WIDTH)
    rgb = pixels[..., :3].reshape(-1, 3)
    assert rgb.std() > 0.05
    # the two attempts' lines (tab10 blue and orange) and the preemption's red mark are drawn
    import numpy

    colours = {tuple(numpy.round(row, 2)) for row in rgb[::7]}
    for colour in ((0.12, 0.47, 0.71), (1.0, 0.5, 0.05), (0.84, 0.15, 0.16)):
        assert any(max(abs(a - b) for a, b in zip(seen, colour, strict=True)) < 0.03 for seen in colours), colour


def test_the_same_data_draws_the_same_file(tmp_path):
    points = step_points(attempt_lines(FILES, RAY), "verl")
    first = draw(points, [], "verl", "t", tmp_path / "a.png").read_bytes()
    assert draw(points, [], "verl", "t", tmp_path / "b.png").read_bytes() == first


@pytest.mark.parametrize("framework", ["verl", "nemo-rl"])
def test_a_run_without_a_step_still_draws_a_picture(tmp_path, framework):
    out = draw([], [], framework, "no steps", tmp_path / "empty.png")
    assert read_png(out).shape[:2] == (HEIGHT, WIDTH)
