//! Game discovery on the real ALFWorld files, from the zip and from a folder.

use alfworld::{AlfworldData, Level, Split, TaskSampler, TaskType};

fn zip() -> std::path::PathBuf {
    testkit::alfworld_data()
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

#[test]
fn a_game_is_a_file_or_a_path_inside_the_data_with_or_without_its_root() {
    let data = || AlfworldData::open(&zip());
    let game = data().unwrap().split(Split::ValidSeen)[0].path.clone();
    let expected = data().unwrap().read(&game).unwrap();
    let (name, text) = alfworld::read_game_text(&game, data).unwrap();
    assert_eq!((name.as_str(), text.as_str()), (game.as_str(), expected.as_str()));
    let bare = game.strip_prefix("json_2.1.1/").unwrap();
    assert_eq!(alfworld::read_game_text(bare, data).unwrap(), (game.clone(), expected.clone()));
    // A file is read as it is; the data is not opened.
    let file = std::env::temp_dir().join(format!("alfworld-read-game-{}.tw-pddl", std::process::id()));
    std::fs::write(&file, &expected).unwrap();
    let named = file.display().to_string();
    let unopened = || -> Result<AlfworldData, alfworld::DataError> { panic!("the data was opened for a file") };
    assert_eq!(alfworld::read_game_text(&named, unopened).unwrap(), (named.clone(), expected));
    let _ = std::fs::remove_file(&file);
    let err = alfworld::read_game_text("valid_seen/no-such-task/t/game.tw-pddl", data).unwrap_err().to_string();
    assert!(err.contains("no-such-task"), "{err}");
}
