//! The seeds' quality table (examples/quality_table.rs) at a reduced size:
//! the iterative (CG) error must be at most a third of gridding's, without
//! and with noise (Stone et al. 2008: 42 % vs 12–13 %, 47 % vs 16 %).

#[allow(dead_code)]
#[path = "../examples/quality_table.rs"]
mod quality_table;

use horecon::BackendKind;
use quality_table::{quality_table, QualitySettings};

#[test]
fn iterative_error_is_at_most_a_third_of_gridding() {
    let settings = QualitySettings {
        n: 16,
        nz: 12,
        backend: BackendKind::Cpu,
        ..QualitySettings::default()
    };
    let table = quality_table(&settings).expect("quality table");
    eprintln!("{settings:?}\n{}", table.markdown());
    for noisy in [false, true] {
        let gridding = table
            .row("gridding (Pipe-Menon DCF)", noisy)
            .expect("gridding row");
        let cg = table.row("iterative (CG)", noisy).expect("CG row");
        assert!(
            cg.percent_error <= gridding.percent_error / 3.0,
            "noisy {noisy}: CG {:.1} % vs gridding {:.1} %",
            cg.percent_error,
            gridding.percent_error
        );
        assert!(cg.psnr > gridding.psnr + 6.0, "noisy {noisy}: PSNR");
        // The gridding baseline is a reconstruction, not noise.
        assert!(
            gridding.percent_error < 80.0,
            "gridding {:.1} %",
            gridding.percent_error
        );
    }
    // Noise costs the iterative reconstruction some accuracy.
    let clean = table.row("iterative (CG)", false).unwrap().percent_error;
    let noisy = table.row("iterative (CG)", true).unwrap().percent_error;
    assert!(noisy > clean, "noise did not change the CG error");
}
