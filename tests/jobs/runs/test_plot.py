"""The run's picture: a PNG of the expected size that is not blank, the same bytes for the same data, the marks of
a preemption and its resume, and that it reads at a glance: marks in colours no attempt uses, a legend beside the
data, every label inside the figure."""

from __future__ import annotations

import pytest

from jobs.runs.observed import StepPoint, attempt_lines, step_points
from jobs.runs.plot import ATTEMPT_COLOURS, DPI, MARK_STYLES, SIZE_INCHES, Marker, draw, figure_of, mark_label, markers
from tests.jobs.runs.test_observed import FILES, RAY, T0, view

WIDTH, HEIGHT = int(SIZE_INCHES[0] * DPI), int(SIZE_INCHES[1] * DPI)


def read_png(path):
    import matplotlib.image

    return matplotlib.image.imread(path)


def test_the_marks_of_a_preemption_and_its_resume():
    figures = view().goodput(now=T0 + 5000)
    assert markers(figures.losses, {1: None, 2: 2}) == [
        Marker(4.0, 1, "preemption"),
        Marker(2.0, 2, "resume"),
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


def many_attempts(count: int = 20) -> tuple[list[StepPoint], list[Marker]]:
    """`count` attempts of 4 steps each, every one but the last preempted or failed, every later one resumed."""
    points = [
        StepPoint(attempt, step, step * 60.0, 0.9 - 0.01 * step, 80.0 + attempt)
        for attempt in range(1, count + 1)
        for step in range(3 * attempt - 2, 3 * attempt + 2)
    ]
    marks = [
        Marker(3 * attempt + 1, attempt, "preemption" if attempt % 2 else "failure") for attempt in range(1, count)
    ]
    marks += [Marker(3 * attempt - 3, attempt, "resume") for attempt in range(2, count + 1)]
    return points, marks


def drawn(figure):
    """`figure` laid out and drawn, and its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return canvas.get_renderer()


def test_no_attempt_line_has_a_marks_colour_even_with_twenty_attempts():
    from matplotlib.colors import to_rgb

    points, marks = many_attempts(20)
    figure = figure_of(points, marks, "verl", "dev-0123456789: 20 attempts")
    mark_colours = {to_rgb(colour) for colour, _ in MARK_STYLES.values()}
    attempt_lines = [line for axes in figure.axes for line in axes.get_lines() if len(line.get_xdata()) > 2]
    mark_lines = [line for axes in figure.axes for line in axes.get_lines() if line not in attempt_lines]
    assert len(attempt_lines) == 2 * 20 and len(mark_lines) == 2 * len(marks)
    assert {to_rgb(line.get_color()) for line in mark_lines} == mark_colours
    for line in attempt_lines:
        colour = to_rgb(line.get_color())
        # far from every mark colour: at least a quarter of the RGB range apart in one channel
        assert all(max(abs(a - b) for a, b in zip(colour, mark, strict=True)) >= 0.25 for mark in mark_colours), colour
    assert {to_rgb(line.get_color()) for line in attempt_lines} == {to_rgb(colour) for colour in ATTEMPT_COLOURS}


@pytest.mark.parametrize("count", [1, 3, 20])
def test_the_legend_covers_no_data_and_no_label_is_cut_off(count):
    points, marks = many_attempts(count)
    figure = figure_of(points, marks, "nemo-rl", f"dev-0123456789abcdef0123456789: {count} attempts")
    renderer = drawn(figure)
    (legend,) = figure.legends
    box = legend.get_window_extent(renderer)
    for axes in figure.axes:
        assert not box.overlaps(axes.get_window_extent(renderer)), "the legend lies over the axes"
    # what is drawn of each axes (its tick labels and axis labels too), the title and the legend lie in the figure
    extents = [axes.get_tightbbox(renderer) for axes in figure.axes]
    extents += [figure._suptitle.get_window_extent(renderer), box]
    whole = figure.bbox
    for extent in extents:
        assert whole.x0 <= extent.x0 and extent.x1 <= whole.x1 and whole.y0 <= extent.y0 and extent.y1 <= whole.y1


def test_the_legend_names_each_kind_of_mark_with_its_steps():
    assert mark_label("resume", [Marker(6, 2, "resume"), Marker(2, 3, "resume")]) == "resumed from step 2, 6"
    assert mark_label("failure", [Marker(0, 1, "failure")]) == "failed at step 0"
    _, marks = many_attempts(20)
    preempted = [mark for mark in marks if mark.kind == "preemption"]
    assert mark_label("preemption", preempted) == "preempted at step 4 to 58 (10 times)"
    figure = figure_of(*many_attempts(3), "verl", "t")
    assert [text.get_text() for text in figure.legends[0].get_texts()] == [
        "attempt 1", "attempt 2", "attempt 3", "preempted at step 4", "failed at step 7", "resumed from step 3, 6",
    ]  # fmt: skip
