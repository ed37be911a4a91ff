pub fn run() -> xtask::Result<()> {
    Err("todo".into())
}
