//! The demo's figure, drawn with plotters and the embedded DejaVu Sans font
//! (no system fonts needed): a row of magnitude images (truth, then each
//! reconstruction titled with its method and NRMSE) on one grey scale with a
//! colour bar, and below it the B0 map (Hz) and the differences |x − truth|
//! on a common viridis scale with their own colour bars. Images are n×n,
//! voxel ix + n·iy, drawn with x to the right and y up.

use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::FontStyle;
use std::error::Error;

/// A colour scale: its range and the colour bar's label.
pub struct Scale {
    pub range: (f64, f64),
    pub label: String,
}

/// One image panel.
pub struct Panel<'a> {
    /// Title lines.
    pub title: Vec<String>,
    /// n×n values, x fastest.
    pub values: &'a [f64],
    /// A viridis scale of its own, with a colour bar under the panel, instead of the row's.
    pub own_scale: Option<Scale>,
}

/// A row of panels on one colour scale (grey or viridis), with a colour bar at its end.
pub struct Row<'a> {
    pub panels: Vec<Panel<'a>>,
    pub grey: bool,
    pub scale: Scale,
}

const FONT: &str = "sans-serif";
const MARGIN: i32 = 16;
const TITLE_LINE: i32 = 18;
const BAR_WIDTH: i32 = 18;
const BAR_SPACE: i32 = 110;
/// Room under a panel with a colour bar of its own.
const UNDER_BAR: i32 = 40;

/// Registers the embedded font once (plotters keeps a global table).
fn register_font() -> Result<(), Box<dyn Error>> {
    plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular())
        .map_err(|_| "the embedded DejaVu Sans font could not be read".into())
}

fn colour(grey: bool, value: f64, (low, high): (f64, f64)) -> RGBColor {
    let t = ((value - low) / (high - low).max(f64::MIN_POSITIVE)).clamp(0.0, 1.0);
    if grey {
        let g = (t * 255.0).round() as u8;
        RGBColor(g, g, g)
    } else {
        ViridisRGB::get_color_normalized(t as f32, 0.0, 1.0)
    }
}

/// Tick labels: three significant digits, no trailing noise.
fn tick(value: f64) -> String {
    if value == 0.0 {
        "0".to_string()
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else if value.abs() >= 1.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    }
}

/// Draws `rows` (each panel n×n voxels shown `scale`× larger) under `heading`
/// and writes an RGB PNG to `path`.
pub fn write_figure(
    path: &str,
    heading: &[String],
    n: usize,
    rows: &[Row],
) -> Result<(), Box<dyn Error>> {
    register_font()?;
    let scale = (256 / n).max(1) as i32;
    let tile = n as i32 * scale;
    let columns = rows.iter().map(|r| r.panels.len()).max().unwrap_or(1) as i32;
    let title_lines = rows
        .iter()
        .flat_map(|r| r.panels.iter().map(|p| p.title.len()))
        .max()
        .unwrap_or(1) as i32;
    let row_heights: Vec<i32> = rows
        .iter()
        .map(|r| {
            let under = r.panels.iter().any(|p| p.own_scale.is_some());
            title_lines * TITLE_LINE + 8 + tile + MARGIN + if under { UNDER_BAR } else { 0 }
        })
        .collect();
    let heading_height = heading.len() as i32 * (TITLE_LINE + 4) + MARGIN;
    let width = MARGIN + columns * (tile + MARGIN) + BAR_SPACE;
    let height = heading_height + row_heights.iter().sum::<i32>() + MARGIN;
    let mut buffer = vec![0u8; width as usize * height as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut buffer, (width as u32, height as u32))
            .into_drawing_area();
        root.fill(&WHITE)?;
        let text = |size: i32| (FONT, size).into_font().color(&BLACK);
        for (i, line) in heading.iter().enumerate() {
            root.draw(&Text::new(
                line.as_str(),
                (MARGIN, MARGIN / 2 + i as i32 * (TITLE_LINE + 4)),
                text(if i == 0 { 18 } else { 15 }),
            ))?;
        }
        let mut top = heading_height;
        for (row, row_height) in rows.iter().zip(&row_heights) {
            let image_top = top + title_lines * TITLE_LINE + 8;
            for (c, panel) in row.panels.iter().enumerate() {
                let left = MARGIN + c as i32 * (tile + MARGIN);
                for (l, line) in panel.title.iter().enumerate() {
                    root.draw(&Text::new(
                        line.as_str(),
                        (left, top + l as i32 * TITLE_LINE),
                        text(14),
                    ))?;
                }
                let (grey, range) = match &panel.own_scale {
                    Some(own) => (false, own.range),
                    None => (row.grey, row.scale.range),
                };
                for iy in 0..n {
                    for ix in 0..n {
                        let x = left + ix as i32 * scale;
                        let y = image_top + (n - 1 - iy) as i32 * scale;
                        let fill = colour(grey, panel.values[ix + n * iy], range);
                        root.draw(&Rectangle::new(
                            [(x, y), (x + scale, y + scale)],
                            fill.filled(),
                        ))?;
                    }
                }
                if let Some(own) = &panel.own_scale {
                    // a horizontal colour bar under the panel, low on the left
                    let bar_top = image_top + tile + 6;
                    for p in 0..tile {
                        let t = p as f64 / (tile - 1).max(1) as f64;
                        let value = own.range.0 + t * (own.range.1 - own.range.0);
                        root.draw(&Rectangle::new(
                            [(left + p, bar_top), (left + p + 1, bar_top + 10)],
                            colour(false, value, own.range).filled(),
                        ))?;
                    }
                    let ends = [
                        (left, tick(own.range.0)),
                        (left + tile / 2 - 30, own.label.clone()),
                        (left + tile - 32, tick(own.range.1)),
                    ];
                    for (x, label) in ends {
                        root.draw(&Text::new(label, (x, bar_top + 13), text(13)))?;
                    }
                }
            }
            // the row's colour bar, low at the bottom, with its label above
            let left = MARGIN + columns * (tile + MARGIN);
            root.draw(&Text::new(
                row.scale.label.as_str(),
                (left, top + (title_lines - 1) * TITLE_LINE),
                text(14),
            ))?;
            for p in 0..tile {
                let t = 1.0 - p as f64 / (tile - 1).max(1) as f64;
                let value = row.scale.range.0 + t * (row.scale.range.1 - row.scale.range.0);
                root.draw(&Rectangle::new(
                    [(left, image_top + p), (left + BAR_WIDTH, image_top + p + 1)],
                    colour(row.grey, value, row.scale.range).filled(),
                ))?;
            }
            root.draw(&Rectangle::new(
                [(left, image_top), (left + BAR_WIDTH, image_top + tile)],
                BLACK.stroke_width(1),
            ))?;
            for k in 0..=4 {
                let t = k as f64 / 4.0;
                let y = image_top + ((1.0 - t) * (tile - 1) as f64).round() as i32;
                let value = row.scale.range.0 + t * (row.scale.range.1 - row.scale.range.0);
                root.draw(&PathElement::new(
                    vec![(left + BAR_WIDTH, y), (left + BAR_WIDTH + 4, y)],
                    BLACK,
                ))?;
                root.draw(&Text::new(
                    tick(value),
                    (left + BAR_WIDTH + 7, y - 7),
                    text(13),
                ))?;
            }
            top += row_height;
        }
        root.present()?;
    }
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, width as u32, height as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(&buffer)?;
    Ok(())
}
