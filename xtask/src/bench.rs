pub fn mysql() -> xtask::Result<()> {
    Err("todo".into())
}
