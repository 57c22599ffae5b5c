//! ALFWorld game discovery: a folder holding `json_2.1.1/` (ALFWorld's
//! `ALFWORLD_DATA` convention, default `~/.cache/alfworld`) or the zip itself.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::task::{Split, TaskType};

pub const DATA_ROOT: &str = "json_2.1.1";
pub const GAME_FILE: &str = "game.tw-pddl";

#[derive(Debug, thiserror::Error)]
pub enum DataError {
    #[error(
        "ALFWorld data not found at {0}: expected a folder holding {DATA_ROOT}/ (or json_2.1.1.zip). \
         Get the data with ALFWorld's `alfworld-download` (pip install alfworld) and set ALFWORLD_DATA \
         to the folder that holds {DATA_ROOT}/, or pass --data with that folder or the zip"
    )]
    NotFound(PathBuf),
    #[error("{0}")]
    Missing(String),
    #[error("cannot read {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("cannot read zip {path}: {source}")]
    Zip {
        path: PathBuf,
        #[source]
        source: zip::result::ZipError,
    },
    #[error("no game file '{0}' in the ALFWorld data")]
    UnknownGame(String),
    #[error("game path '{0}' leaves the data folder")]
    BadPath(String),
}

/// One game of the data set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GameEntry {
    /// Path relative to the data folder: `json_2.1.1/<split>/<task>/<trial>/game.tw-pddl`.
    pub path: String,
    pub split: Split,
    pub task_type: TaskType,
    /// The task folder name, e.g. `pick_heat_then_place_in_recep-Apple-None-DiningTable-26`.
    pub task_dir: String,
}

impl GameEntry {
    /// Parses a relative game path; `None` when it is not a game of a known split and task type.
    pub fn from_path(path: &str) -> Option<GameEntry> {
        let parts: Vec<&str> = path.split('/').collect();
        let [root, split, task_dir, _trial, file] = parts.as_slice() else { return None };
        if *root != DATA_ROOT || *file != GAME_FILE {
            return None;
        }
        let split = Split::from_name(split)?;
        let task_type = TaskType::from_task_dir(task_dir)?;
        Some(GameEntry { path: path.to_string(), split, task_type, task_dir: task_dir.to_string() })
    }
}

enum Source {
    Dir(PathBuf),
    Zip { path: PathBuf, archive: Mutex<zip::ZipArchive<File>> },
}

/// The ALFWorld game files, from a folder or a zip.
pub struct AlfworldData {
    source: Source,
    games: Vec<GameEntry>,
}

impl std::fmt::Debug for AlfworldData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlfworldData({}, {} games)", self.location().display(), self.games.len())
    }
}

/// A game named by a user: the file itself when `game` is one, else a game of the data
/// (`open_data` is called only then), by its path inside the data folder with or without the
/// leading `json_2.1.1/`. Returns the name the game goes by (the path as given for a file, the
/// data-relative path otherwise) and its text.
pub fn read_game_text<E: From<DataError>>(
    game: &str,
    open_data: impl FnOnce() -> Result<AlfworldData, E>,
) -> Result<(String, String), E> {
    let path = Path::new(game);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(io_err(path))?;
        return Ok((game.to_string(), text));
    }
    let relative = if game.starts_with(&format!("{DATA_ROOT}/")) { game.to_string() } else { format!("{DATA_ROOT}/{game}") };
    let text = open_data()?.read(&relative)?;
    Ok((relative, text))
}

/// `$ALFWORLD_DATA`, else `~/.cache/alfworld`: ALFWorld's own convention, the first place
/// [`AlfworldData::open_default`] looks.
pub fn default_data_dir() -> PathBuf {
    crate::locate::candidates(Path::new("."))[0].clone()
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io { path: path.display().to_string(), source }
}

impl AlfworldData {
    /// Opens a data folder (holding `json_2.1.1/`, or that folder itself, or
    /// holding `json_2.1.1.zip`) or a zip file.
    pub fn open(location: &Path) -> Result<AlfworldData, DataError> {
        if location.is_file() {
            return Self::open_zip(location);
        }
        if location.join(DATA_ROOT).is_dir() {
            return Self::open_dir(location);
        }
        if location.file_name().is_some_and(|n| n == DATA_ROOT) && location.is_dir() {
            if let Some(parent) = location.parent() {
                return Self::open_dir(parent);
            }
        }
        let zip = location.join(format!("{DATA_ROOT}.zip"));
        if zip.is_file() {
            return Self::open_zip(&zip);
        }
        Err(DataError::NotFound(location.to_path_buf()))
    }

    /// Opens the first place of [`crate::locate::candidates`] (from the working directory)
    /// that holds the data: `$ALFWORLD_DATA`, else `~/.cache/alfworld`, else the zip beside
    /// the repository. The error says where it looked and how to get the data.
    pub fn open_default() -> Result<AlfworldData, DataError> {
        let base = Path::new(".");
        match crate::locate::find_data(base) {
            Some(path) => Self::open(&path),
            None => Err(DataError::Missing(crate::locate::missing_data_help(base))),
        }
    }

    fn open_dir(dir: &Path) -> Result<AlfworldData, DataError> {
        let mut games = Vec::new();
        let root = dir.join(DATA_ROOT);
        for split in Split::ALL {
            let split_dir = root.join(split.name());
            if !split_dir.is_dir() {
                continue;
            }
            for task in std::fs::read_dir(&split_dir).map_err(io_err(&split_dir))? {
                let task = task.map_err(io_err(&split_dir))?.path();
                let Ok(trials) = std::fs::read_dir(&task) else { continue };
                for trial in trials.flatten() {
                    if !trial.path().join(GAME_FILE).is_file() {
                        continue;
                    }
                    let rel = format!(
                        "{DATA_ROOT}/{}/{}/{}/{GAME_FILE}",
                        split.name(),
                        task.file_name().unwrap_or_default().to_string_lossy(),
                        trial.file_name().to_string_lossy()
                    );
                    games.extend(GameEntry::from_path(&rel));
                }
            }
        }
        games.sort();
        Ok(AlfworldData { source: Source::Dir(dir.to_path_buf()), games })
    }

    fn open_zip(path: &Path) -> Result<AlfworldData, DataError> {
        let file = File::open(path).map_err(io_err(path))?;
        let archive = zip::ZipArchive::new(file).map_err(|e| DataError::Zip { path: path.to_path_buf(), source: e })?;
        let mut games: Vec<GameEntry> = archive.file_names().filter_map(GameEntry::from_path).collect();
        games.sort();
        Ok(AlfworldData { source: Source::Zip { path: path.to_path_buf(), archive: Mutex::new(archive) }, games })
    }

    /// Where the data comes from.
    pub fn location(&self) -> &Path {
        match &self.source {
            Source::Dir(d) => d,
            Source::Zip { path, .. } => path,
        }
    }

    /// All games, sorted by path.
    pub fn games(&self) -> &[GameEntry] {
        &self.games
    }

    pub fn split(&self, split: Split) -> Vec<&GameEntry> {
        self.games.iter().filter(|g| g.split == split).collect()
    }

    /// The text of a game file given its path relative to the data folder.
    pub fn read(&self, rel_path: &str) -> Result<String, DataError> {
        if rel_path.split('/').any(|p| p == "..") || rel_path.starts_with('/') {
            return Err(DataError::BadPath(rel_path.to_string()));
        }
        match &self.source {
            Source::Dir(dir) => {
                let path = dir.join(rel_path);
                if !path.is_file() {
                    return Err(DataError::UnknownGame(rel_path.to_string()));
                }
                std::fs::read_to_string(&path).map_err(io_err(&path))
            }
            Source::Zip { path, archive } => {
                let mut archive = archive.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                let mut entry = archive.by_name(rel_path).map_err(|_| DataError::UnknownGame(rel_path.to_string()))?;
                let mut text = String::new();
                entry.read_to_string(&mut text).map_err(|source| DataError::Io { path: format!("{}!{rel_path}", path.display()), source })?;
                Ok(text)
            }
        }
    }
}
