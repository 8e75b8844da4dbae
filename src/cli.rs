//! The server's command line and its config file.
//!
//! `sluice --config sluice.toml` reads flags from a TOML file: every flag is a key, spelled as
//! on the command line without the dashes (`listen`, `data-dir`; `data_dir` also reads), with a
//! string, integer or boolean value. The command line wins over the file, so a service's unit
//! can point at one file and a person can still override one flag. A key that is not a flag,
//! a table, an array, or an unreadable file is an error that names the file and the key.
//!
//! ```toml
//! listen = "0.0.0.0:4566"
//! data-dir = "/var/lib/sluice"
//! http = "off"
//! barrier-interval-ms = 500
//! ```

use std::ffi::OsString;
use std::path::Path;

/// The command line `args` with the flags of its `--config FILE` (or `--config=FILE`) placed
/// before the others, so that a flag also given on the command line takes the command line's
/// value (the parser must let a later occurrence override an earlier one). `flags` are the long
/// names the server accepts; `--config` itself stays in the result, for the parser to accept.
pub fn with_config_file(args: Vec<OsString>, flags: &[&str]) -> Result<Vec<OsString>, String> {
    let Some(path) = config_path(&args) else {
        return Ok(args);
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    let from_file =
        config_flags(&text, flags).map_err(|e| format!("config file {}: {e}", path.display()))?;
    let mut out = Vec::with_capacity(args.len() + from_file.len());
    let mut args = args.into_iter();
    out.extend(args.next());
    out.extend(from_file.into_iter().map(OsString::from));
    out.extend(args);
    Ok(out)
}

/// The file named by the last `--config` on the command line, if any.
fn config_path(args: &[OsString]) -> Option<std::path::PathBuf> {
    let mut path = None;
    let mut args = args.iter().skip(1);
    while let Some(arg) = args.next() {
        let Some(arg) = arg.to_str() else { continue };
        if arg == "--" {
            break;
        }
        if arg == "--config" {
            path = args.next().map(|p| Path::new(p).to_path_buf());
        } else if let Some(p) = arg.strip_prefix("--config=") {
            path = Some(Path::new(p).to_path_buf());
        }
    }
    path
}

/// The flags a config file's text sets, as `--name=value` arguments.
fn config_flags(text: &str, flags: &[&str]) -> Result<Vec<String>, String> {
    let document = toml_edit::Document::parse(text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (key, item) in document.as_table().iter() {
        let name = key.replace('_', "-");
        if name == "config" || !flags.contains(&name.as_str()) {
            let mut known: Vec<&str> = flags.iter().copied().filter(|f| *f != "config").collect();
            known.sort_unstable();
            return Err(format!("'{key}' is not a flag of sluice (keys: {})", known.join(", ")));
        }
        let value = match item.as_value() {
            Some(toml_edit::Value::String(s)) => s.value().clone(),
            Some(toml_edit::Value::Integer(i)) => i.value().to_string(),
            Some(toml_edit::Value::Boolean(b)) => b.value().to_string(),
            Some(toml_edit::Value::Float(f)) => f.value().to_string(),
            _ => {
                return Err(format!(
                    "'{key}' must be a string, a number or a boolean, as on the command line"
                ));
            }
        };
        out.push(format!("--{name}={value}"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLAGS: &[&str] = &["listen", "data-dir", "http", "barrier-interval-ms", "config"];

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    fn strings(list: Vec<OsString>) -> Vec<String> {
        list.into_iter().map(|a| a.into_string().unwrap()).collect()
    }

    #[test]
    fn file_flags_come_first_so_the_command_line_wins() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("sluice.toml");
        std::fs::write(
            &file,
            "listen = \"0.0.0.0:4566\"\ndata_dir = \"/var/lib/sluice\"\nbarrier-interval-ms = 500\n",
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let out =
            with_config_file(args(&["sluice", "--config", file, "--listen", "1.2.3.4:5"]), FLAGS)
                .unwrap();
        assert_eq!(
            strings(out),
            [
                "sluice",
                "--listen=0.0.0.0:4566",
                "--data-dir=/var/lib/sluice",
                "--barrier-interval-ms=500",
                "--config",
                file,
                "--listen",
                "1.2.3.4:5",
            ]
        );
        let equals = format!("--config={file}");
        let out = with_config_file(args(&["sluice", &equals]), FLAGS).unwrap();
        assert_eq!(strings(out)[1], "--listen=0.0.0.0:4566");
    }

    #[test]
    fn without_a_config_the_arguments_are_unchanged() {
        let out = with_config_file(args(&["sluice", "--listen", "x"]), FLAGS).unwrap();
        assert_eq!(strings(out), ["sluice", "--listen", "x"]);
    }

    #[test]
    fn bad_files_are_errors_that_name_the_file_and_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        for (text, says) in [
            (
                "lissen = \"x\"",
                "'lissen' is not a flag of sluice (keys: barrier-interval-ms, data-dir, http, listen)",
            ),
            ("config = \"other.toml\"", "'config' is not a flag"),
            ("listen = [1, 2]", "'listen' must be a string, a number or a boolean"),
            ("[server]\nlisten = \"x\"", "'server' is not a flag"),
            ("[listen]\nport = 1", "'listen' must be a string"),
            ("listen = ", "TOML parse error"),
        ] {
            std::fs::write(&file, text).unwrap();
            let err =
                with_config_file(args(&["sluice", "--config", file.to_str().unwrap()]), FLAGS)
                    .unwrap_err();
            assert!(err.contains("bad.toml") && err.contains(says), "{text}: {err}");
        }
        let err = with_config_file(args(&["sluice", "--config", "/nonexistent/s.toml"]), FLAGS)
            .unwrap_err();
        assert!(err.starts_with("cannot read the config file /nonexistent/s.toml"), "{err}");
    }
}
