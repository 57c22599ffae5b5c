//! ALFWorld's splits and task types, and RLVMR's generalisation levels.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Split {
    Train,
    ValidSeen,
    ValidUnseen,
    ValidTrain,
}

impl Split {
    pub const ALL: [Split; 4] = [Split::Train, Split::ValidSeen, Split::ValidUnseen, Split::ValidTrain];

    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::ValidSeen => "valid_seen",
            Split::ValidUnseen => "valid_unseen",
            Split::ValidTrain => "valid_train",
        }
    }

    pub fn from_name(name: &str) -> Option<Split> {
        Split::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The six ALFWorld task types, numbered as ALFWorld numbers them (1..=6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TaskType {
    PickAndPlace = 1,
    LookAtInLight = 2,
    PickClean = 3,
    PickHeat = 4,
    PickCool = 5,
    PickTwo = 6,
}

impl TaskType {
    pub const ALL: [TaskType; 6] = [TaskType::PickAndPlace, TaskType::LookAtInLight, TaskType::PickClean, TaskType::PickHeat, TaskType::PickCool, TaskType::PickTwo];

    /// ALFWorld's folder prefix, e.g. `pick_clean_then_place_in_recep`.
    pub fn name(self) -> &'static str {
        match self {
            TaskType::PickAndPlace => "pick_and_place_simple",
            TaskType::LookAtInLight => "look_at_obj_in_light",
            TaskType::PickClean => "pick_clean_then_place_in_recep",
            TaskType::PickHeat => "pick_heat_then_place_in_recep",
            TaskType::PickCool => "pick_cool_then_place_in_recep",
            TaskType::PickTwo => "pick_two_obj_and_place",
        }
    }

    /// The short name used in result tables (pick, look, clean, heat, cool, pick_two).
    pub fn short(self) -> &'static str {
        match self {
            TaskType::PickAndPlace => "pick",
            TaskType::LookAtInLight => "look",
            TaskType::PickClean => "clean",
            TaskType::PickHeat => "heat",
            TaskType::PickCool => "cool",
            TaskType::PickTwo => "pick_two",
        }
    }

    pub fn id(self) -> u8 {
        self as u8
    }

    pub fn from_task_dir(dir: &str) -> Option<TaskType> {
        let prefix = dir.split('-').next()?;
        TaskType::ALL.into_iter().find(|t| t.name() == prefix)
    }
}

impl fmt::Display for TaskType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}

/// What a task folder name says: `<type>-<object>-<movable or None>-<parent>-<scene>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskSpec {
    pub task_type: TaskType,
    pub object: String,
    pub movable: Option<String>,
    /// The receptacle type to place into; for look tasks, the lamp type.
    pub parent: String,
    pub scene: u32,
}

impl TaskSpec {
    pub fn from_task_dir(dir: &str) -> Option<TaskSpec> {
        let parts: Vec<&str> = dir.split('-').collect();
        let [ty, object, movable, parent, scene] = parts.as_slice() else { return None };
        Some(TaskSpec {
            task_type: TaskType::from_task_dir(ty)?,
            object: object.to_string(),
            movable: (*movable != "None").then(|| movable.to_string()),
            parent: parent.to_string(),
            scene: scene.parse().ok()?,
        })
    }
}

/// RLVMR's generalisation levels for ALFWorld.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// Train on all six types; test on valid_seen.
    L0,
    /// Train on all six types; test on valid_unseen.
    L1,
    /// Train on types 1-4; test on types 5-6 (cool, pick_two) of valid_unseen.
    L2,
}

impl Level {
    pub fn from_name(name: &str) -> Option<Level> {
        match name.to_ascii_uppercase().as_str() {
            "L0" => Some(Level::L0),
            "L1" => Some(Level::L1),
            "L2" => Some(Level::L2),
            _ => None,
        }
    }

    pub fn train_types(self) -> &'static [TaskType] {
        match self {
            Level::L0 | Level::L1 => &TaskType::ALL,
            Level::L2 => &TaskType::ALL[..4],
        }
    }

    pub fn test_split(self) -> Split {
        match self {
            Level::L0 => Split::ValidSeen,
            Level::L1 | Level::L2 => Split::ValidUnseen,
        }
    }

    pub fn test_types(self) -> &'static [TaskType] {
        match self {
            Level::L0 | Level::L1 => &TaskType::ALL,
            Level::L2 => &TaskType::ALL[4..],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_dir_names_parse() {
        let t = TaskSpec::from_task_dir("pick_heat_then_place_in_recep-Apple-None-DiningTable-26").unwrap();
        assert_eq!((t.task_type, t.object.as_str(), t.movable, t.parent.as_str(), t.scene), (TaskType::PickHeat, "Apple", None, "DiningTable", 26));
        let t = TaskSpec::from_task_dir("pick_and_place_with_movable_recep-Pen-Mug-Desk-1");
        assert!(t.is_none(), "not one of the six types");
        assert_eq!(TaskType::from_task_dir("look_at_obj_in_light-Book-None-DeskLamp-1"), Some(TaskType::LookAtInLight));
        assert_eq!(TaskType::PickTwo.id(), 6);
    }
}
