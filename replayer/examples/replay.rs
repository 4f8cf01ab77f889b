//! `cargo run -p replayer --example replay -- TRACE [--gpu SEL] [--loop N] [--results OUT] [--compare] [--validate]`:
//! `quarry replay` without the root CLI (its own small argument loop; see `quarry replay --help`
//! for every option).
use replayer::ReplayOptions;

fn usage(why: &str) -> ! {
    eprintln!(
        "quarry: {why}\nusage: replay TRACE [--gpu SEL] [--loop N] [--results OUT] [--compare] [--validate]"
    );
    std::process::exit(2);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut opts: Option<ReplayOptions> = None;
    let mut rest = Vec::new();
    while let Some(a) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{a} needs a value")))
        };
        match a.as_str() {
            "--gpu" => rest.push(("gpu", value())),
            "--loop" => rest.push(("loop", value())),
            "--results" => rest.push(("results", value())),
            "--compare" => rest.push(("compare", String::new())),
            "--validate" => rest.push(("validate", String::new())),
            s if s.starts_with("--") => usage(&format!("unknown option {s}")),
            _ if opts.is_none() => opts = Some(ReplayOptions::new(&a)),
            _ => usage("one trace only"),
        }
    }
    let mut opts = opts.unwrap_or_else(|| usage("no trace given"));
    for (k, v) in rest {
        match k {
            "gpu" => opts.gpu = Some(v),
            "loop" => {
                opts.loops = v.parse().unwrap_or_else(|_| usage("--loop takes a count"));
                opts.progress = opts.loops > 1;
            }
            "results" => opts.results = Some(v.into()),
            "compare" => opts.compare = true,
            _ => opts.validate = true,
        }
    }
    match replayer::replay(&opts) {
        Ok(s) => {
            print!("{}", s.to_text(opts.compare));
            std::process::exit(i32::from(opts.compare && s.comparison.failed()));
        }
        Err(e) => {
            eprintln!("quarry: {e}");
            std::process::exit(if matches!(e, replayer::ReplayError::Trace(_)) {
                2
            } else {
                1
            });
        }
    }
}
