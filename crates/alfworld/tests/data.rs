//! Game discovery on the real ALFWorld files, from the zip and from a folder.

use std::path::Path;

use alfworld::{AlfworldData, Level, Split, TaskSampler, TaskType};

fn zip() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/alfworld/json_2.1.1.zip")
}

#[test]
fn splits_and_task_types_from_folder_names() {
    let data = AlfworldData::open(&zip()).unwrap();
    let count = |s| data.split(s).len();
    assert_eq!((count(Split::Train), count(Split::ValidSeen), count(Split::ValidUnseen)), (3553, 140, 134));
    for t in TaskType::ALL {
        assert!(data.split(Split::Train).iter().any(|g| g.task_type == t), "{t} missing in train");
    }
    assert_eq!(Level::L2.test_games(&data).len(), 38);
    assert!(Level::L2.train_games(&data).iter().all(|g| g.task_type.id() <= 4));
    assert_eq!(Level::L0.test_games(&data).len(), 140);
    assert_eq!(Level::L1.train_games(&data).len(), 3553);
}

#[test]
fn sampling_is_seeded() {
    let data = AlfworldData::open(&zip()).unwrap();
    let games: Vec<_> = Level::L0.train_games(&data).into_iter().cloned().collect();
    let a = TaskSampler::new(games.clone(), 42).unwrap().sample_n(16);
    let b = TaskSampler::new(games, 42).unwrap().sample_n(16);
    assert_eq!(a, b);
}

#[test]
fn a_folder_reads_like_the_zip() {
    let data = AlfworldData::open(&zip()).unwrap();
    let game = &data.split(Split::ValidUnseen)[0].path;
    let dir = std::env::temp_dir().join(format!("alfworld-data-test-{}", std::process::id()));
    let file = dir.join(game);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, data.read(game).unwrap()).unwrap();
    let folder = AlfworldData::open(&dir).unwrap();
    assert_eq!(folder.games().len(), 1);
    assert_eq!(folder.read(game).unwrap(), data.read(game).unwrap());
    // The json_2.1.1 folder itself is accepted too.
    assert_eq!(AlfworldData::open(&dir.join("json_2.1.1")).unwrap().games().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
