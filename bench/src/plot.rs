//! `--plot FILE.svg`: a run as a picture, so that backends compare at a glance. Two panels side by side, the
//! throughput and the p99 latency of every phase, one bar per row of the report (a backend under one
//! authentication), on logarithmic axes since the phases differ by orders of magnitude.

use std::path::Path;

use plotters::prelude::*;

use crate::report::{PhaseResult, Report};

/// Height of one bar, in pixels.
const BAR: usize = 14;
/// Width of the whole picture.
const WIDTH: u32 = 1500;
/// Room for the phase names left of each panel.
const NAMES: u32 = 230;

/// One panel's measure of a phase.
struct Measure {
    title: &'static str,
    value: fn(&PhaseResult) -> f64,
}

/// Draws `report` into an SVG file at `path`.
pub fn write_svg(report: &Report, path: &Path) -> Result<(), String> {
    let rows: Vec<&str> = report.backends.iter().map(|b| b.backend.as_str()).collect();
    let mut phases: Vec<&str> = Vec::new();
    for backend in &report.backends {
        for phase in &backend.phases {
            if !phases.contains(&phase.name.as_str()) {
                phases.push(&phase.name);
            }
        }
    }
    if rows.is_empty() || phases.is_empty() {
        return Err("nothing to plot: the run has no phases".into());
    }
    // One slot per row and one empty slot between phases; the first phase at the top.
    let slots = phases.len() * (rows.len() + 1);
    let height = (90 + slots * BAR + 60 + rows.len() * 18) as u32;
    let root = SVGBackend::new(path, (WIDTH, height)).into_drawing_area();
    let error = |e: DrawingAreaErrorKind<_>| format!("{}: {e}", path.display());
    root.fill(&WHITE).map_err(error)?;
    let root = root
        .titled(
            &format!(
                "apiserver-bench, {} ({} cores, {}, {})",
                report.date.get(..16).unwrap_or(&report.date),
                report.machine.cores,
                report.machine.cpu,
                report.mode.rsplit(", ").next().unwrap_or_default()
            ),
            ("sans-serif", 18),
        )
        .map_err(error)?;
    let (left, right) = root.split_horizontally(WIDTH / 2);
    let measures = [
        Measure {
            title: "throughput, requests/s (log scale)",
            value: |p| p.per_second,
        },
        Measure {
            title: "p99 latency, ms (log scale)",
            value: |p| p.p99_ms,
        },
    ];
    for (area, measure) in [left, right].iter().zip(measures) {
        panel(area, report, &rows, &phases, &measure, slots)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    root.present().map_err(error)
}

/// The y segment of row `row`'s bar for phase `phase` (the first phase at the top).
fn slot(phase: usize, row: usize, rows: usize, slots: usize) -> i32 {
    (slots - phase * (rows + 1) - row - 1) as i32
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    report: &Report,
    rows: &[&str],
    phases: &[&str],
    measure: &Measure,
    slots: usize,
) -> Result<(), Box<dyn std::error::Error + 'static>>
where
    DB::ErrorType: 'static,
{
    let values = report
        .backends
        .iter()
        .flat_map(|b| b.phases.iter().map(measure.value))
        .filter(|v| *v > 0.0);
    let (low, high) = values.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let (low, high) = if low > high {
        (0.1, 10.0)
    } else {
        (low / 2.0, high * 2.0)
    };
    // A phase's name beside the middle bar of its group.
    let middle = rows.len() / 2;
    let name_of = |y: &SegmentValue<i32>| match y {
        SegmentValue::CenterOf(y) => (0..phases.len())
            .find(|&i| slot(i, middle, rows.len(), slots) == *y)
            .map(|i| phases[i].to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    let mut chart = ChartBuilder::on(area)
        .caption(measure.title, ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(NAMES)
        .build_cartesian_2d((low..high).log_scale(), (0..slots as i32).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(slots + 1)
        .y_label_formatter(&name_of)
        .x_label_formatter(&|v| {
            if *v >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.2}")
            }
        })
        .draw()?;
    for (r, backend) in report.backends.iter().enumerate() {
        let color = Palette99::pick(r).to_rgba();
        let bars: Vec<_> = backend
            .phases
            .iter()
            .filter(|p| (measure.value)(p) > 0.0)
            .filter_map(|p| {
                let i = phases.iter().position(|n| *n == p.name)?;
                let y = slot(i, r, rows.len(), slots);
                Some(Rectangle::new(
                    [
                        (low, SegmentValue::Exact(y)),
                        ((measure.value)(p), SegmentValue::Exact(y + 1)),
                    ],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)?
            .label(rows[r])
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::slot;

    #[test]
    fn phases_run_top_down_and_rows_within_them() {
        // Two phases, three rows: four slots per phase (one empty), eight in all.
        assert_eq!(slot(0, 0, 3, 8), 7);
        assert_eq!(slot(0, 2, 3, 8), 5);
        assert_eq!(slot(1, 0, 3, 8), 3);
        assert_eq!(slot(1, 2, 3, 8), 1);
    }
}
