//! Launch helpers for this layer; they live in `layer_support::counters` (see there why).

pub use layer_support::counters::*;

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::path::PathBuf;

    #[test]
    fn manifest_names_the_layer_and_escapes_the_path() {
        let text = manifest_json("/tmp/a \"b\"\\c/libVkLayer_quarry_counters.so");
        assert!(text.contains(r#""library_path": "/tmp/a \"b\"\\c/libVkLayer_quarry_counters.so""#));
        assert!(text.contains(r#""name": "VK_LAYER_QUARRY_counters""#));
        assert!(text.contains(r#""name": "VK_KHR_performance_query""#));
    }

    #[test]
    fn checked_in_manifest_matches_the_layer() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/VkLayer_quarry_counters.json"
        ))
        .unwrap();
        assert_eq!(text, manifest_json("./libVkLayer_quarry_counters.so"));
    }

    #[test]
    fn layer_dir_writes_env_and_cleans_up() {
        let lib =
            std::env::temp_dir().join(format!("quarry-fake-counters-{}.so", std::process::id()));
        std::fs::write(&lib, b"x").unwrap();
        let dir;
        {
            let l = LayerDir::new(&lib).unwrap();
            dir = l.dir.clone();
            let text = std::fs::read_to_string(dir.join(MANIFEST_FILE)).unwrap();
            assert!(text.contains(&*std::fs::canonicalize(&lib).unwrap().to_string_lossy()));
            let [(pk, pv), (ek, ev)] =
                l.env_values(Some("/old".into()), Some("VK_LAYER_QUARRY_capture".into()));
            assert_eq!(pk, "VK_ADD_LAYER_PATH");
            assert_eq!(pv, OsString::from(format!("{}:/old", dir.display())));
            assert_eq!(ek, "VK_LOADER_LAYERS_ENABLE");
            assert_eq!(ev, "VK_LAYER_QUARRY_capture,VK_LAYER_QUARRY_counters");
            let [_, (_, ev)] = l.env_values(None, Some("".into()));
            assert_eq!(ev, "VK_LAYER_QUARRY_counters");
        }
        assert!(!dir.exists(), "manifest dir removed on drop");
        let _ = std::fs::remove_file(lib);
    }

    #[test]
    fn missing_library_is_an_error_not_a_panic() {
        let e = LaunchError::LibraryNotFound {
            file: LIBRARY_FILE,
            package: "counters_layer",
            env: LIBRARY_ENV,
            tried: vec![PathBuf::from("/nonexistent/x.so")],
        };
        assert!(e.to_string().contains("not found"));
        assert!(e.to_string().contains("/nonexistent/x.so"));
    }
}
